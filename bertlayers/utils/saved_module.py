"""A `tf.Module` that a SavedModel saves without scanning its attributes for functions."""

from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)


class SavedModule(tf.Module):
    """A `tf.Module` whose SavedModel children are its tracked attributes only.

    For a SavedModel, TensorFlow reads every attribute of a `tf.Module` looking for
    `tf.function`s to save, `tf.Module`'s own `variables`, `trainable_variables` and `submodules`
    properties among them, each a walk of everything the module tracks: about a fifth of a small
    model's export. The servable and the in-graph tokenizers hold no function to save (their
    signatures are given to `tf.saved_model.save`), so the scan finds nothing; their variables,
    tables and files are tracked as ever.
    """

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        return super()._trackable_children("checkpoint", **kwargs)
