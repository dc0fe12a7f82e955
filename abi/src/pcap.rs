//! pcap read/write for MRC frames.
