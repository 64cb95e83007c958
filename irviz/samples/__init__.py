"""Sample model files shipped with irviz (each defines get_model() -> (module, example_inputs)).

The core finds them as package data and runs each as a model file (irviz.core.frontend.sample_files);
nothing imports them as modules. Load one with load_model("sample:NAME").
"""
