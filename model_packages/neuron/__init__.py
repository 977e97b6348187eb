"""The inf1 example: Neuron models generated from the classifier's TorchScript."""
