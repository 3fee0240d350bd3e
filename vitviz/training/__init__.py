"""Training: a run's settings, its parts, the loop and its commands, held-out accuracy, the app's quick run.

config.py     TrainConfig: a run's settings, parsed and validated with sentences (CLI and app)
parts.py      what a run is made of: its progress, its parts once set up, its meter, the weight average
batches.py    the batch pipeline on the device
heldout.py    held-out accuracy: at each epoch's end, and on a small sample every few seconds
clock.py      a run's clock: the next step within its budget, validations sized to end on time
precision.py  bf16 autocast where it was measured faster
events.py     the events the loop yields (the command prints them, the app streams them)
loop.py       the training loop in parts
command.py    `vitviz train`: the loop from the command line
average.py    `vitviz average`: the mean of several checkpoints' weights
quick.py      the Train tab's quick run: its settings for a time budget, its data and probe images
pace.py       a live run's pace, and when other visitors slow it
record.py     a run's model with its own card; the epoch snapshots kept
stops.py      stop requests, keyed by visitor (also across processes, on ZeroGPU)

`vitviz evaluate` (a checkpoint's test accuracy) is vitviz.evaluate, above the pictures it can draw.
"""
