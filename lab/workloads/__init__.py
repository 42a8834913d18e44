"""The built-in workloads, one folder each (``lab/workloads/NAME/``): its workload.yaml in the format users write
for their own workloads, with a scaling hook (scale.py) and an output parser (parse.py) where it needs them.
lab.workloads.registry finds and reads the folders; adding a built-in is adding a folder (docs/workloads.md)."""
