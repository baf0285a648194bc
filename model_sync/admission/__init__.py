"""Admission: whether a version may be pushed or promoted to an environment, decided before anything is
written. Can its Triton load it in its export format (`alignment`), and does it fit its deployment's GPU
(`gpu_plan`). What the replicas then serve is model_sync.observation's."""
