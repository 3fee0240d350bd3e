"""What the process decides once and every layer may use; imports nothing else of vitviz.

zerogpu.py  is Hugging Face ZeroGPU on (read before torch is imported)
device.py   the device and bf16 autocast, decided once per CPU or GPU
memory.py   freed memory given back to the operating system
scratch.py  the folders the app writes for visitors, pruned
"""
