"""Measuring candidates on this machine by building and timing them: library call or TensorIR per
call, tile sizes per kernel, and the per-machine cache of the decisions. The passes that use this
(LibraryDispatch(measure=True), CPUTuneConv2d, CPUTuneReductions) are registered in ``passes``;
nothing here applies a registry pass: the lowering and schedule steps are given directly.
"""
