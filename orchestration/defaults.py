"""Defaults and limits of the audit run config, in a module that imports nothing: the Config
classes state them on their fields (``orchestration/defs/<family>/config.py``), from which the
``dora audit`` flags and their range checks are derived."""

#: Descriptors per bias dimension in the default (quick) audit; 0 means all of them.
DEFAULT_PER_DIMENSION = 2
#: Completions per descriptor x setting x letter in the default (quick) audit (paper: 10).
DEFAULT_RUNS = 4
#: Images per descriptor and T2I setting in the default (quick) vision audit (paper: 10).
DEFAULT_IMAGES_PER_DESCRIPTOR = 4

# Upper limits of the count fields (the paper uses 10 runs, 10 images, 364 descriptors): generous
# for real use, small enough that a typo cannot exhaust the machine (``--runs 1000000000`` would
# plan billions of rows). The Config fields state them as ``le=``; the flags check them.
MAX_RUNS = 1000
MAX_PER_DIMENSION = 10_000
MAX_BATCH = 4096
MAX_IMAGES = 1000
MAX_TOKENS = 8192
MAX_JUDGE_RUNS = 100
MAX_TOP = 100_000
MAX_COUNT = 100_000  # ModSCAN runs, instances, face pairs, images per trait
MAX_API_CONCURRENCY = 256
