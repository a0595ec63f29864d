"""The task readers: files of a fine-tuning task (classification CSV/TSV, SQuAD, NER, multiple
choice, retrieval pairs, mixed tasks) into a model's inputs and labels."""
