//! The host <-> NIC contract: register blocks, doorbells, descriptors, admin commands, CSR queues.
