"""Images in: the data sets (CIFAR-10, MNIST), preprocessing for any model, the example gallery.

datasets.py  data sets from zips or torchvision, preprocessing, batch augmentation ops
gallery.py   the shipped example images
"""
