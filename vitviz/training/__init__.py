"""Training: a run's settings, its batches, the loop and its command, held-out accuracy, live runs.

config.py    TrainConfig: a run's settings, parsed and validated with sentences (CLI and app)
batches.py   the batch pipeline on the device
heldout.py   held-out accuracy: at each epoch's end, and on a small sample every few seconds
clock.py     a run's clock: the next step within its budget, validations sized to end on time
loop.py      the training loop in parts and `vitviz train`
evaluate.py  `vitviz evaluate`: a checkpoint's test accuracy
average.py   `vitviz average`: the mean of several checkpoints' weights
live.py      live training runs for the app
"""
