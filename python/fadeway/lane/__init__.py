"""The ordered lane (MECHANISM: "When each part runs"): the one table of job kinds (`jobs`) and
the worker that runs each memory's jobs in order (`worker`)."""
