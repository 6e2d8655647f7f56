"""e2ee-bench: what each security level costs, measured on this machine with the project's code."""

from shared import __version__ as __version__
