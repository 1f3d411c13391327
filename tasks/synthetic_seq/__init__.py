"""SyntheticSeq(K, epsilon): federated token sequences with controlled NIID-ness."""
