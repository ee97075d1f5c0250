"""The reliability suite of issue 33: harnesses that hold fadeway to its promises under kill -9,
concurrent callers, hostile memory ids and over-limit input, each printing its figure.

The quick tier runs with the rest of the tests; the long tier scales the counts up:

    FADEWAY_RELIABILITY=long pytest -s tests/reliability
"""
