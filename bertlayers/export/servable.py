"""What a SavedModel serves: the model's computation with named, batch-first outputs."""

from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)

from bertlayers.utils.saved_module import SavedModule  # noqa: E402  (after the check above, which names what is missing)


class Servable(SavedModule):
    """The model's computation with named, batch-first outputs; variables tracked once."""

    def __init__(self, model, outputs, input_names, limits):
        super().__init__()
        self._model = model  # not tracked as a Keras object: its variables are tracked below
        self.outputs = outputs  # a `serving_outputs` adapter
        self.model_variables = [v.value for v in model.variables]
        self.input_names = input_names
        self.limits = limits
        # One trace of the model for every signature that calls it with inputs of one structure
        # and shape (an ids model's three signatures, a text model's text and pair ones): each
        # signature's trace of the whole model took as long as the rest of the export.
        self._traced_run = tf.function(self._run, autograph=False)  # graph ops already (signatures.py)

    def __setattr__(self, name, value):
        if name in ("_model", "outputs", "_traced_run"):  # keep Keras's own trackables out of the SavedModel graph
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def run(self, inputs):
        """{input name: tensor} (the model's inputs) -> {output name: tensor}."""
        return self._traced_run(inputs)

    def _run(self, inputs):
        # float32 out whatever the model computes in: clients see one signature for every precision.
        outputs = self.outputs(self._model, inputs)
        return {key: tf.cast(value, tf.float32) if value.dtype.is_floating else value for key, value in outputs.items()}
