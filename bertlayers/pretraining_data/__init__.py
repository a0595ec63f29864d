"""The pretraining record pipeline: corpora into documents, documents into examples, masking,
TFRecords, and the batches a pretraining run trains on (`pretraining_inputs`)."""
