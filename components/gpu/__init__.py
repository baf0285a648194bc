"""The GPU side of scheduling: the taint and labels every GPU workload agrees on, defined once
(`gpu_contract`), what each GPU instance size carries (`gpu_instances`) and whether a replica fits
a node (`node_fit`)."""
