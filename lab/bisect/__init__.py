"""``numalab bisect``: which patch of a series changed the verdict, decided with statistics at every step.

engine.py: the search over the series' prefixes, the endpoints, the steps and the state directory, behind a
step-runner interface (:class:`lab.bisect.engine.StepRunner`); step_rule.py: a step's good/bad/undecided
decision; kernel_steps.py: the real runner (kernel builds and VM runs); bisect_report.py: the report.
"""
