"""Running the course on a cluster (07_cluster): job scripts for Slurm and PJM, the systems and
queues they are checked against, and a single-node Slurm for the tests and the lecture."""
