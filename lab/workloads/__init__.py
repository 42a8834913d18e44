"""Everything a workload is, in one place.

The modules: the :class:`~lab.workloads.workload_type.Workload` type (workload_type.py), how a workload's output
is read (workload_output.py, with the readers built-ins share in output_readers.py), what its figures mean
(metric_declarations.py), a user's workload file and ``--workload-cmd`` with their schema check
(user_workload.py), the ELF helpers its programs need (elf.py), and what its guest image carries
(image_layers.py, which hands lab.guest.image the files to lay out).

The built-in workloads, one folder each (``lab/workloads/NAME/``): its workload.yaml in the format users write
for their own workloads, with a scaling hook (scale.py) and an output parser (parse.py) or a named reader where
it needs them. lab.workloads.registry finds and reads the folders; adding a built-in is adding a folder
(docs/workloads.md). A folder is never a Python package, nor named after a module beside it.
"""
