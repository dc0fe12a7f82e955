//! # mrc-rtl-cosim: RTL blocks checked against `mrc_firmware::datapath`
