"""The strict evidence count, now `fadeway.evaluate.evidence` (shared with `fadeway eval
--no-answer`); kept here so the benches' `from evidence import ...` reads on."""

from fadeway.evaluate.evidence import *  # noqa: F403
from fadeway.evaluate.evidence import __all__  # noqa: F401
