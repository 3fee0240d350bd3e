"""What a model is and where it comes from: the network, its card, its checkpoints, one adapter per family.

vit.py        our ViT and its config presets (the network only)
card.py       ModelCard: config, data set, classes, normalisation, training record
bound.py      how large a model may be (VITVIZ_MAX_MODEL_PARAMS), counted before anything is spent; ModelError
fileset.py    several files written as one set: a kill leaves the old set or the new
checkpoint.py save and load (safetensors + JSON), validated
loaded.py     LoadedViT, the record every explaining function asks: module, card, token layout,
              blocks, norm, head, forward_intermediates
tv_vit.py     torchvision's ViT-B/16: its adapter
timm_vit.py   timm's ViTs (DeiT, DINO, DINOv2 with registers): built, loaded, their adapter
hub.py        load_model: shipped, torchvision, timm, a path -> the record
"""
