"""What a page shows: from a model and an image to pictures, each with its title and colour scale.

draw.py         arrays in, pictures out: overlays, grids, strips
panels.py       a map made readable: its title, its colour bar, what its values are
explanation.py  one image's analysis (Explanation), the Model summary, export
explore.py      the Explore pictures (ExploreView), each drawn from only the options it depends on
backbone.py     the pictures of a model without a classifier
steps.py        the Step-by-step stages: a picture and a sentence each
removal.py      Take patches away: every map's deletion curve, the hidden patches
"""
