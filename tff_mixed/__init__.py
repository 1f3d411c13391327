"""tff_mixed: mixed FL, decaying local steps and adaptive FL as TFF processes."""

from tff_mixed import algorithms
from tff_mixed import checks
from tff_mixed import driver
from tff_mixed import execution
from tff_mixed import group_data
from tff_mixed import metrics
from tff_mixed import models
from tff_mixed import optimizers
from tff_mixed import program
from tff_mixed import runtimes
from tff_mixed import schedules
from tff_mixed import task
from tff_mixed import templates

__version__ = '0.1.0'
