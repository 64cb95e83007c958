"""The engine protocol, imported by the engine, the GUI's bridge and the tests' fake bridge alike
(no Qt, no torch, no TVM): the commands and the state's TypedDicts (`commands`), the argument types
and their run-time check (`argtypes`), replies in parts (`parts`) and the generated doc (`doc`)."""
