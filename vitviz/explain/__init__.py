"""Explaining a model: tensors in, tensors out; every function takes a model record (vitviz.models.loaded).

interpret.py  attention, rollout, gradient rollout, LeGrad, occlusion, distances, the walk, logit lens
methods.py    every map by name, deletion curves and their AUC
sanity.py     cascading randomisation and Spearman rank correlation (Adebayo et al.)
features.py   a model without a classifier: head masks, principal colours, feature similarity
"""
