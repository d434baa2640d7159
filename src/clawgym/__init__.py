"""clawgym: synthesize, run, verify and train Claw-style personal agents."""

__version__ = "0.1.0"
