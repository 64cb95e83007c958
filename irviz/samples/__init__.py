"""Sample model files shipped with irviz (each defines get_model() -> (module, example_inputs)).

Listed by irviz.core.frontend.samples.list_samples(); load one with load_model("sample:NAME").
"""
