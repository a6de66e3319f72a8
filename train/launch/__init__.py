"""Launching training runs: ``python -m train.launch`` (the attempt loop with restarts and
cordoned nodes, ``train.launch.launcher``) and the SLURM template ``slurm.sbatch``."""
