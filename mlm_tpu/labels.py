"""The label value that means "no loss here", shared by sharding, masking, training and evaluation."""

IGNORE_INDEX = -100  # the 🤗 convention: Keras losses of transformers' TF models skip it
