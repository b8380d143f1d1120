"""Records and column names every stage may import (pure): the tables of a
results folder, the link and sample records the monitors produce and the
results read, the bandwidth arithmetic of nccl-tests."""
