-- mrc.lua: Wireshark dissector for MRC (Multipath Reliable Connection), wire version 1.
--
-- The contract is abi/WIRE.md. This file decodes every MRC header after UDP (destination port
-- 4791, taken over from the RoCE dissector): BTH, MRH, EVX, TSX, RETH, ImmDt, ACKX, NACKX, PRBX and
-- the payload. Ethernet, IPv6, the SRH and IPv6-in-IPv6 are left to Wireshark's own dissectors;
-- this file only reads a few of their fields to check the MRC encapsulation rules.
--
-- Field names are `mrc.<hdr>.<field>`, the same names as the Rust decoder's JSON
-- (`mrc_abi::wire`). Reserved fields are `mrc.<hdr>.reserved*` and are not part of that JSON.
-- A well-formed packet produces no expert info at all; every rule of WIRE.md that a packet breaks
-- produces exactly one expert item that says what failed.
--
-- Load: tshark -X lua_script:abi/wireshark/mrc.lua ...   (or copy to the personal Lua plugins
-- folder, see abi/wireshark/README.md). Needs Wireshark 3.6 or newer (tested with 4.0).

local mrc = Proto("mrc", "Multipath Reliable Connection")

local MRC_UDP_PORT = 4791
local MRC_VERSION = 1

local OPCODES = {
    [0xC0] = "WRITE_FIRST",
    [0xC1] = "WRITE_MIDDLE",
    [0xC2] = "WRITE_LAST",
    [0xC3] = "WRITE_LAST_IMM",
    [0xC4] = "WRITE_ONLY",
    [0xC5] = "WRITE_ONLY_IMM",
    [0xD0] = "ACK",
    [0xD1] = "NACK",
    [0xD2] = "EV_PROBE",
    [0xD3] = "EV_PROBE_REPLY",
}
local OP_WRITE = { [0xC0] = true, [0xC1] = true, [0xC2] = true, [0xC3] = true, [0xC4] = true, [0xC5] = true }
local OP_IMM = { [0xC3] = true, [0xC5] = true }
local OP_ACK, OP_NACK, OP_PROBE, OP_PROBE_REPLY = 0xD0, 0xD1, 0xD2, 0xD3

local EV_FORMATS = { [0] = "Udp", [1] = "Stev", [2] = "Srv6", [3] = "Invalid" }
local EV_FORMAT_UDP, EV_FORMAT_STEV, EV_FORMAT_SRV6 = 0, 1, 2

local NACK_REASONS = {
    [1] = "TRIMMED",
    [2] = "TRIMMED_LAST_HOP",
    [3] = "OUT_OF_WINDOW",
    [4] = "REMOTE_ACCESS",
    [5] = "LENGTH",
    [6] = "NO_RECV_BUFFER",
    [7] = "INVALID_QP",
    [8] = "TOO_MANY_WIMM",
}

-- Header sizes (WIRE.md "Sizes").
local BTH_LEN, MRH_LEN, EVX_LEN, TSX_LEN = 12, 4, 8, 8
local RETH_LEN, IMMDT_LEN, ACKX_LEN, NACKX_LEN, PRBX_LEN = 16, 4, 24, 16, 8

---------------------------------------------------------------------------------------------------
-- Fields

local D = base.DEC
local F = {
    bth = ProtoField.none("mrc.bth", "Base Transport Header (BTH)"),
    bth_opcode = ProtoField.uint8("mrc.bth.opcode", "Opcode", D, OPCODES),
    bth_se = ProtoField.uint8("mrc.bth.se", "Solicited event (SE)", D, nil, 0x80),
    bth_m = ProtoField.uint8("mrc.bth.m", "Migration (M)", D, nil, 0x40),
    bth_pad_count = ProtoField.uint8("mrc.bth.pad_count", "Pad count", D, nil, 0x30),
    bth_tver = ProtoField.uint8("mrc.bth.tver", "Transport version", D, nil, 0x0F),
    bth_pkey = ProtoField.uint16("mrc.bth.pkey", "P_Key", base.DEC_HEX),
    bth_fecn = ProtoField.uint8("mrc.bth.fecn", "FECN", D, nil, 0x80),
    bth_becn = ProtoField.uint8("mrc.bth.becn", "BECN", D, nil, 0x40),
    bth_reserved4 = ProtoField.uint8("mrc.bth.reserved4", "Reserved (byte 4)", base.HEX, nil, 0x3F),
    bth_dest_qp = ProtoField.uint24("mrc.bth.dest_qp", "Destination QP", base.DEC_HEX),
    bth_ack_req = ProtoField.uint8("mrc.bth.ack_req", "Ack request (A)", D, nil, 0x80),
    bth_reserved8 = ProtoField.uint8("mrc.bth.reserved8", "Reserved (byte 8)", base.HEX, nil, 0x7F),
    bth_psn = ProtoField.uint24("mrc.bth.psn", "PSN", D),

    mrh = ProtoField.none("mrc.mrh", "MRC Header (MRH)"),
    mrh_version = ProtoField.uint8("mrc.mrh.version", "MRC version", D, nil, 0xF0),
    mrh_ev_format = ProtoField.uint8("mrc.mrh.ev_format", "EV format", D, EV_FORMATS, 0x0C),
    mrh_reserved0 = ProtoField.uint8("mrc.mrh.reserved0", "Reserved (byte 0)", base.HEX, nil, 0x03),
    mrh_evx_present = ProtoField.uint8("mrc.mrh.evx_present", "EVX present", D, nil, 0x80),
    mrh_tsx_present = ProtoField.uint8("mrc.mrh.tsx_present", "TSX present", D, nil, 0x40),
    mrh_trimmed = ProtoField.uint8("mrc.mrh.trimmed", "Trimmed", D, nil, 0x20),
    mrh_trimmed_last_hop = ProtoField.uint8("mrc.mrh.trimmed_last_hop", "Trimmed at last hop", D, nil, 0x10),
    mrh_retransmit = ProtoField.uint8("mrc.mrh.retransmit", "Retransmit", D, nil, 0x08),
    mrh_reserved1 = ProtoField.uint8("mrc.mrh.reserved1", "Reserved (byte 1)", base.HEX, nil, 0x07),
    mrh_msn = ProtoField.uint16("mrc.mrh.msn", "Message sequence number", D),

    evx = ProtoField.none("mrc.evx", "EV Extension (EVX)"),
    evx_ev_index = ProtoField.uint16("mrc.evx.ev_index", "EV index", D),
    evx_plane = ProtoField.uint8("mrc.evx.plane", "Plane", D),
    evx_reserved = ProtoField.uint8("mrc.evx.reserved", "Reserved", base.HEX),
    evx_ev_value = ProtoField.uint32("mrc.evx.ev_value", "EV value", base.DEC_HEX),

    tsx = ProtoField.none("mrc.tsx", "Timestamp Extension (TSX)"),
    tsx_tx_ts_ns = ProtoField.uint32("mrc.tsx.tx_ts_ns", "Tx timestamp (ns, low 32 bits)", D),
    tsx_echo_ts_ns = ProtoField.uint32("mrc.tsx.echo_ts_ns", "Echoed timestamp (ns)", D),

    reth = ProtoField.none("mrc.reth", "RDMA Extended Transport Header (RETH)"),
    reth_va = ProtoField.uint64("mrc.reth.va", "Virtual address", base.DEC_HEX),
    reth_rkey = ProtoField.uint32("mrc.reth.rkey", "Remote key", base.DEC_HEX),
    reth_dma_len = ProtoField.uint32("mrc.reth.dma_len", "DMA length", D),

    immdt = ProtoField.none("mrc.immdt", "Immediate Data (ImmDt)"),
    immdt_imm = ProtoField.uint32("mrc.immdt.imm", "Immediate data", base.DEC_HEX),

    ack = ProtoField.none("mrc.ack", "ACK Extension (ACKX)"),
    ack_reserved0 = ProtoField.uint8("mrc.ack.reserved0", "Reserved (byte 0)", base.HEX),
    ack_cum_psn = ProtoField.uint24("mrc.ack.cum_psn", "Cumulative PSN", D),
    ack_reserved4 = ProtoField.uint8("mrc.ack.reserved4", "Reserved (byte 4)", base.HEX),
    ack_sack_base = ProtoField.uint24("mrc.ack.sack_base", "SACK base PSN", D),
    ack_sack_bitmap = ProtoField.uint64("mrc.ack.sack_bitmap", "SACK bitmap", base.DEC_HEX),
    ack_ev_index = ProtoField.uint16("mrc.ack.ev_index", "EV index", D),
    ack_plane = ProtoField.uint8("mrc.ack.plane", "Plane", D),
    ack_ecn_plane_mask = ProtoField.uint8("mrc.ack.ecn_plane_mask", "ECN plane mask", base.DEC_HEX),
    ack_ce_count = ProtoField.uint16("mrc.ack.ce_count", "CE-marked packets", D),
    ack_pkt_count = ProtoField.uint16("mrc.ack.pkt_count", "Packets covered", D),

    nack = ProtoField.none("mrc.nack", "NACK Extension (NACKX)"),
    nack_reason = ProtoField.uint8("mrc.nack.reason", "Reason", D, NACK_REASONS),
    nack_psn = ProtoField.uint24("mrc.nack.psn", "NACKed PSN", D),
    nack_reserved4 = ProtoField.uint8("mrc.nack.reserved4", "Reserved (byte 4)", base.HEX),
    nack_cum_psn = ProtoField.uint24("mrc.nack.cum_psn", "Cumulative PSN", D),
    nack_ev_index = ProtoField.uint16("mrc.nack.ev_index", "EV index", D),
    nack_plane = ProtoField.uint8("mrc.nack.plane", "Plane", D),
    nack_reserved11 = ProtoField.uint8("mrc.nack.reserved11", "Reserved (byte 11)", base.HEX),
    nack_reserved12 = ProtoField.uint32("mrc.nack.reserved12", "Reserved (bytes 12-15)", base.HEX),

    probe = ProtoField.none("mrc.probe", "EV Probe Extension (PRBX)"),
    probe_probe_id = ProtoField.uint32("mrc.probe.probe_id", "Probe id", D),
    probe_ev_index = ProtoField.uint16("mrc.probe.ev_index", "EV index", D),
    probe_plane = ProtoField.uint8("mrc.probe.plane", "Plane", D),
    probe_reserved = ProtoField.uint8("mrc.probe.reserved", "Reserved", base.HEX),

    payload = ProtoField.bytes("mrc.payload", "Payload"),
    payload_len = ProtoField.uint32("mrc.payload_len", "Payload length", D),
    undecoded = ProtoField.bytes("mrc.undecoded", "Undecoded bytes"),
}
local field_list = {}
for _, f in pairs(F) do field_list[#field_list + 1] = f end
mrc.fields = field_list

---------------------------------------------------------------------------------------------------
-- Expert info

local ERR, WARN = expert.severity.ERROR, expert.severity.WARN
local MAL, PROTO, SEQ, CSUM = expert.group.MALFORMED, expert.group.PROTOCOL, expert.group.SEQUENCE,
    expert.group.CHECKSUM
local E = {
    truncated = ProtoExpert.new("mrc.truncated", "Truncated MRC header", MAL, ERR),
    bad_version = ProtoExpert.new("mrc.bad_version", "Bad MRC version", MAL, ERR),
    ev_format_invalid = ProtoExpert.new("mrc.ev_format_invalid", "EV format 3 is invalid", MAL, ERR),
    unknown_opcode = ProtoExpert.new("mrc.unknown_opcode", "Unknown MRC opcode", MAL, ERR),
    dma_len_mismatch = ProtoExpert.new("mrc.reth.dma_len_mismatch",
        "RETH DMA length differs from the payload length", PROTO, ERR),
    zero_checksum = ProtoExpert.new("mrc.udp_checksum_zero", "UDP checksum is zero", CSUM, ERR),
    srh_invalid = ProtoExpert.new("mrc.srh_invalid", "SRH violates WIRE.md", MAL, ERR),
    reserved = ProtoExpert.new("mrc.reserved_nonzero", "Reserved bits are not zero", PROTO, WARN),
    unknown_reason = ProtoExpert.new("mrc.nack.unknown_reason", "Unknown NACK reason", PROTO, WARN),
    trailing = ProtoExpert.new("mrc.trailing_bytes", "Bytes after the control header", PROTO, WARN),
    trimmed = ProtoExpert.new("mrc.trimmed_inconsistent", "Inconsistent trim flags", PROTO, WARN),
    ev_mismatch = ProtoExpert.new("mrc.ev_mismatch", "EV does not match the encapsulation", SEQ, WARN),
}
mrc.experts = { E.truncated, E.bad_version, E.ev_format_invalid, E.unknown_opcode,
    E.dma_len_mismatch, E.zero_checksum, E.srh_invalid, E.reserved, E.unknown_reason, E.trailing,
    E.trimmed, E.ev_mismatch }

---------------------------------------------------------------------------------------------------
-- Fields of the lower layers (read only, to check the encapsulation)

local f_udp_srcport = Field.new("udp.srcport")
local f_udp_checksum = Field.new("udp.checksum")
local f_ipv6_flow = Field.new("ipv6.flow")
local f_ipv6_nxt = Field.new("ipv6.nxt")
local f_rt_nxt = Field.new("ipv6.routing.nxt")
local f_rt_type = Field.new("ipv6.routing.type")
local f_rt_len = Field.new("ipv6.routing.len")
local f_rt_segleft = Field.new("ipv6.routing.segleft")
local f_srh_last_entry = Field.new("ipv6.routing.srh.last_entry")

-- Value of the innermost (last) occurrence of a field in this packet, or nil.
local function last_value(field)
    local all = { field() }
    if #all == 0 then return nil end
    return all[#all].value
end

-- Value of the first occurrence, or nil.
local function first_value(field)
    local fi = field()
    if fi == nil then return nil end
    return fi.value
end

-- True if an IPv6 header or an SRH announces IPv6 (next header 41) as its next header.
local function has_ipv6_in_ipv6()
    for _, field in ipairs({ f_ipv6_nxt, f_rt_nxt }) do
        for _, fi in ipairs({ field() }) do
            if fi.value == 41 then return true end
        end
    end
    return false
end

-- WIRE.md: UDP checksum mandatory; SRH checks; EV encoding rules of the three formats.
local function check_encapsulation(root, ev_format, ev_value)
    local csum = last_value(f_udp_checksum)
    if csum == 0 then
        root:add_proto_expert_info(E.zero_checksum, "UDP checksum is zero (mandatory for MRC)")
    end

    local rt_type = first_value(f_rt_type)
    if rt_type == 4 then
        local segleft = first_value(f_rt_segleft)
        local last_entry = first_value(f_srh_last_entry)
        local hdr_ext_len = first_value(f_rt_len)
        if segleft ~= nil and last_entry ~= nil and segleft > last_entry then
            root:add_proto_expert_info(E.srh_invalid, string.format(
                "SRH segments left %d > last entry %d", segleft, last_entry))
        end
        if last_entry ~= nil and hdr_ext_len ~= nil and 16 * (last_entry + 1) > 8 * hdr_ext_len then
            root:add_proto_expert_info(E.srh_invalid, string.format(
                "SRH too short: %d segments need %d bytes, header extension length %d gives %d",
                last_entry + 1, 16 * (last_entry + 1), hdr_ext_len, 8 * hdr_ext_len))
        end
    end

    if ev_format == nil or ev_format == 3 then return end
    local nested = has_ipv6_in_ipv6()
    if ev_format == EV_FORMAT_SRV6 and not nested then
        root:add_proto_expert_info(E.ev_mismatch, "EV format Srv6 without an inner IPv6 header")
    elseif ev_format ~= EV_FORMAT_SRV6 and nested then
        root:add_proto_expert_info(E.ev_mismatch, string.format(
            "EV format %s inside IPv6-in-IPv6 (expected Srv6)", EV_FORMATS[ev_format]))
    end
    local sport = last_value(f_udp_srcport)
    if sport == nil then return end
    if ev_format == EV_FORMAT_STEV and bit.rshift(sport, 12) ~= 0xC then
        root:add_proto_expert_info(E.ev_mismatch, string.format(
            "STEV UDP source port 0x%04x outside 0xC000-0xCFFF", sport))
    end
    if ev_value == nil then return end
    if ev_format == EV_FORMAT_UDP and ev_value ~= sport then
        root:add_proto_expert_info(E.ev_mismatch, string.format(
            "EVX EV value %d != UDP source port %d", ev_value, sport))
    elseif ev_format == EV_FORMAT_STEV then
        local flow = last_value(f_ipv6_flow) or 0
        local expect = bit.bor(bit.lshift(bit.band(sport, 0xFFF), 20), flow)
        -- bit ops are signed 32-bit in Lua BitOp: compare modulo 2^32
        if expect < 0 then expect = expect + 4294967296 end
        if ev_value ~= expect then
            root:add_proto_expert_info(E.ev_mismatch, string.format(
                "EVX EV value 0x%08x != STEV from source port and flow label 0x%08x", ev_value, expect))
        end
    end
end

---------------------------------------------------------------------------------------------------
-- Dissector

local function warn_reserved(item, what, value)
    if value ~= 0 then
        item:add_proto_expert_info(E.reserved, string.format("%s reserved bits are not zero: 0x%x", what, value))
    end
end

function mrc.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    local off = 0
    pinfo.cols.protocol = "MRC"
    local root = tree:add(mrc, tvb(), "Multipath Reliable Connection")
    local info = "MRC"

    local function done()
        pinfo.cols.info = info
        return len
    end

    -- true if `n` bytes of header `name` are there; else the expert error and the leftovers
    local function need(name, n)
        local have = len - off
        if have >= n then return true end
        root:add_proto_expert_info(E.truncated, string.format(
            "Truncated %s: %d bytes missing (need %d, have %d)", name, n - have, n, have))
        if have > 0 then root:add(F.undecoded, tvb(off, have)) end
        info = info .. " [truncated " .. name .. "]"
        return false
    end

    ---- BTH
    if not need("BTH", BTH_LEN) then
        check_encapsulation(root, nil, nil)
        return done()
    end
    local opcode = tvb(off, 1):uint()
    local qp = tvb(off + 5, 3):uint()
    local psn = tvb(off + 9, 3):uint()
    local bth = root:add(F.bth, tvb(off, BTH_LEN))
    bth:add(F.bth_opcode, tvb(off, 1))
    bth:add(F.bth_se, tvb(off + 1, 1))
    bth:add(F.bth_m, tvb(off + 1, 1))
    bth:add(F.bth_pad_count, tvb(off + 1, 1))
    bth:add(F.bth_tver, tvb(off + 1, 1))
    bth:add(F.bth_pkey, tvb(off + 2, 2))
    bth:add(F.bth_fecn, tvb(off + 4, 1))
    bth:add(F.bth_becn, tvb(off + 4, 1))
    local r4 = bth:add(F.bth_reserved4, tvb(off + 4, 1))
    bth:add(F.bth_dest_qp, tvb(off + 5, 3))
    bth:add(F.bth_ack_req, tvb(off + 8, 1))
    local r8 = bth:add(F.bth_reserved8, tvb(off + 8, 1))
    bth:add(F.bth_psn, tvb(off + 9, 3))
    warn_reserved(r4, "BTH", bit.band(tvb(off + 4, 1):uint(), 0x3F))
    warn_reserved(r8, "BTH", bit.band(tvb(off + 8, 1):uint(), 0x7F))
    local opname = OPCODES[opcode]
    bth:append_text(string.format(", %s, QP 0x%06x, PSN %d", opname or string.format("0x%02x", opcode), qp, psn))
    info = string.format("MRC %s QP=0x%06x PSN=%d", opname or string.format("UNKNOWN(0x%02x)", opcode), qp, psn)
    if opname == nil then
        root:add_proto_expert_info(E.unknown_opcode, string.format("Unknown opcode 0x%02x", opcode))
    end
    off = off + BTH_LEN

    ---- MRH
    if not need("MRH", MRH_LEN) then
        check_encapsulation(root, nil, nil)
        return done()
    end
    local b0, b1 = tvb(off, 1):uint(), tvb(off + 1, 1):uint()
    local version = bit.rshift(b0, 4)
    local ev_format = bit.band(bit.rshift(b0, 2), 3)
    local has_evx, has_tsx = bit.band(b1, 0x80) ~= 0, bit.band(b1, 0x40) ~= 0
    local trimmed, trimmed_lh = bit.band(b1, 0x20) ~= 0, bit.band(b1, 0x10) ~= 0
    local retransmit = bit.band(b1, 0x08) ~= 0
    local mrh = root:add(F.mrh, tvb(off, MRH_LEN))
    local vitem = mrh:add(F.mrh_version, tvb(off, 1))
    local fitem = mrh:add(F.mrh_ev_format, tvb(off, 1))
    local m0 = mrh:add(F.mrh_reserved0, tvb(off, 1))
    mrh:add(F.mrh_evx_present, tvb(off + 1, 1))
    mrh:add(F.mrh_tsx_present, tvb(off + 1, 1))
    local titem = mrh:add(F.mrh_trimmed, tvb(off + 1, 1))
    mrh:add(F.mrh_trimmed_last_hop, tvb(off + 1, 1))
    mrh:add(F.mrh_retransmit, tvb(off + 1, 1))
    local m1 = mrh:add(F.mrh_reserved1, tvb(off + 1, 1))
    mrh:add(F.mrh_msn, tvb(off + 2, 2))
    off = off + MRH_LEN
    if version ~= MRC_VERSION then
        vitem:add_proto_expert_info(E.bad_version, string.format(
            "Bad MRC version %d (expected %d): rest not decoded", version, MRC_VERSION))
        if len > off then root:add(F.undecoded, tvb(off)) end
        info = info .. string.format(" [bad version %d]", version)
        check_encapsulation(root, nil, nil)
        return done()
    end
    if ev_format == 3 then
        fitem:add_proto_expert_info(E.ev_format_invalid, "EV format 3 is invalid (0 Udp, 1 Stev, 2 Srv6)")
    end
    warn_reserved(m0, "MRH", bit.band(b0, 0x03))
    warn_reserved(m1, "MRH", bit.band(b1, 0x07))
    if trimmed_lh and not trimmed then
        titem:add_proto_expert_info(E.trimmed, "TRIMMED_LAST_HOP set without TRIMMED")
    end

    ---- EVX, TSX (fixed order)
    local ev_value = nil
    if has_evx then
        if not need("EVX", EVX_LEN) then
            check_encapsulation(root, ev_format, nil)
            return done()
        end
        local evx = root:add(F.evx, tvb(off, EVX_LEN))
        evx:add(F.evx_ev_index, tvb(off, 2))
        evx:add(F.evx_plane, tvb(off + 2, 1))
        local r = evx:add(F.evx_reserved, tvb(off + 3, 1))
        evx:add(F.evx_ev_value, tvb(off + 4, 4))
        warn_reserved(r, "EVX", tvb(off + 3, 1):uint())
        ev_value = tvb(off + 4, 4):uint()
        info = info .. string.format(" EV=%d", tvb(off, 2):uint())
        off = off + EVX_LEN
    end
    check_encapsulation(root, ev_format, ev_value)
    if has_tsx then
        if not need("TSX", TSX_LEN) then return done() end
        local tsx = root:add(F.tsx, tvb(off, TSX_LEN))
        tsx:add(F.tsx_tx_ts_ns, tvb(off, 4))
        tsx:add(F.tsx_echo_ts_ns, tvb(off + 4, 4))
        off = off + TSX_LEN
    end
    if opname == nil then
        if len > off then root:add(F.undecoded, tvb(off)) end
        return done()
    end

    ---- body
    if OP_WRITE[opcode] then
        if not need("RETH", RETH_LEN) then return done() end
        local dma_len = tvb(off + 12, 4):uint()
        local reth = root:add(F.reth, tvb(off, RETH_LEN))
        reth:add(F.reth_va, tvb(off, 8))
        reth:add(F.reth_rkey, tvb(off + 8, 4))
        local litem = reth:add(F.reth_dma_len, tvb(off + 12, 4))
        off = off + RETH_LEN
        if OP_IMM[opcode] then
            if not need("ImmDt", IMMDT_LEN) then return done() end
            local imm = root:add(F.immdt, tvb(off, IMMDT_LEN))
            imm:add(F.immdt_imm, tvb(off, 4))
            info = info .. string.format(" IMM=0x%08x", tvb(off, 4):uint())
            off = off + IMMDT_LEN
        end
        local plen = tvb:reported_len() - off
        if len > off then root:add(F.payload, tvb(off)) end
        root:add(F.payload_len, plen):set_generated()
        info = info .. string.format(" LEN=%d", dma_len)
        if trimmed then
            info = info .. (trimmed_lh and " [TRIMMED_LAST_HOP]" or " [TRIMMED]")
            if plen ~= 0 then
                titem:add_proto_expert_info(E.trimmed, string.format(
                    "TRIMMED packet still carries %d payload bytes", plen))
            end
        elseif dma_len ~= plen then
            litem:add_proto_expert_info(E.dma_len_mismatch, string.format(
                "RETH DMA length %d != payload length %d", dma_len, plen))
        end
    else
        if trimmed or trimmed_lh then
            titem:add_proto_expert_info(E.trimmed, "TRIMMED set on a packet without payload")
        end
        if opcode == OP_ACK then
            if not need("ACKX", ACKX_LEN) then return done() end
            local ack = root:add(F.ack, tvb(off, ACKX_LEN))
            local a0 = ack:add(F.ack_reserved0, tvb(off, 1))
            ack:add(F.ack_cum_psn, tvb(off + 1, 3))
            local a4 = ack:add(F.ack_reserved4, tvb(off + 4, 1))
            ack:add(F.ack_sack_base, tvb(off + 5, 3))
            ack:add(F.ack_sack_bitmap, tvb(off + 8, 8))
            ack:add(F.ack_ev_index, tvb(off + 16, 2))
            ack:add(F.ack_plane, tvb(off + 18, 1))
            ack:add(F.ack_ecn_plane_mask, tvb(off + 19, 1))
            ack:add(F.ack_ce_count, tvb(off + 20, 2))
            ack:add(F.ack_pkt_count, tvb(off + 22, 2))
            warn_reserved(a0, "ACKX", tvb(off, 1):uint())
            warn_reserved(a4, "ACKX", tvb(off + 4, 1):uint())
            info = info .. string.format(" CUM=%d SACK=%d/0x%s", tvb(off + 1, 3):uint(),
                tvb(off + 5, 3):uint(), tvb(off + 8, 8):uint64():tohex())
            off = off + ACKX_LEN
        elseif opcode == OP_NACK then
            if not need("NACKX", NACKX_LEN) then return done() end
            local reason = tvb(off, 1):uint()
            local nack = root:add(F.nack, tvb(off, NACKX_LEN))
            local ritem = nack:add(F.nack_reason, tvb(off, 1))
            nack:add(F.nack_psn, tvb(off + 1, 3))
            local n4 = nack:add(F.nack_reserved4, tvb(off + 4, 1))
            nack:add(F.nack_cum_psn, tvb(off + 5, 3))
            nack:add(F.nack_ev_index, tvb(off + 8, 2))
            nack:add(F.nack_plane, tvb(off + 10, 1))
            local n11 = nack:add(F.nack_reserved11, tvb(off + 11, 1))
            local n12 = nack:add(F.nack_reserved12, tvb(off + 12, 4))
            warn_reserved(n4, "NACKX", tvb(off + 4, 1):uint())
            warn_reserved(n11, "NACKX", tvb(off + 11, 1):uint())
            warn_reserved(n12, "NACKX", tvb(off + 12, 4):uint())
            if NACK_REASONS[reason] == nil then
                ritem:add_proto_expert_info(E.unknown_reason, string.format("Unknown NACK reason %d", reason))
            end
            info = info .. string.format(" %s NPSN=%d CUM=%d",
                NACK_REASONS[reason] or string.format("REASON(%d)", reason),
                tvb(off + 1, 3):uint(), tvb(off + 5, 3):uint())
            off = off + NACKX_LEN
        else -- EV_PROBE, EV_PROBE_REPLY
            if not need("PRBX", PRBX_LEN) then return done() end
            local prb = root:add(F.probe, tvb(off, PRBX_LEN))
            prb:add(F.probe_probe_id, tvb(off, 4))
            prb:add(F.probe_ev_index, tvb(off + 4, 2))
            prb:add(F.probe_plane, tvb(off + 6, 1))
            local p7 = prb:add(F.probe_reserved, tvb(off + 7, 1))
            warn_reserved(p7, "PRBX", tvb(off + 7, 1):uint())
            info = info .. string.format(" ID=%d PROBED_EV=%d", tvb(off, 4):uint(), tvb(off + 4, 2):uint())
            off = off + PRBX_LEN
        end
        local plen = tvb:reported_len() - off
        if len > off then
            local t = root:add(F.payload, tvb(off))
            t:add_proto_expert_info(E.trailing, string.format(
                "%d unexpected bytes after the %s header", plen, opname))
        end
        root:add(F.payload_len, plen):set_generated()
    end
    if retransmit then info = info .. " [RETX]" end
    return done()
end

---------------------------------------------------------------------------------------------------
-- Registration: UDP destination port 4791 (replaces RoCEv2), plus a heuristic for captures where
-- the source port (an EV) is itself a registered port: enable it with udp.try_heuristic_first.

mrc.prefs.port = Pref.uint("UDP port", MRC_UDP_PORT, "UDP destination port of MRC (default 4791)")

local udp_port_table = DissectorTable.get("udp.port")
local registered_port = MRC_UDP_PORT
-- whatever owned the port before (RoCEv2 for 4791), given back when the port preference moves
local previous_owner = udp_port_table:get_dissector(registered_port)
udp_port_table:add(registered_port, mrc)

function mrc.prefs_changed()
    if mrc.prefs.port ~= registered_port then
        udp_port_table:remove(registered_port, mrc)
        if previous_owner ~= nil then udp_port_table:add(registered_port, previous_owner) end
        registered_port = mrc.prefs.port
        previous_owner = udp_port_table:get_dissector(registered_port)
        udp_port_table:add(registered_port, mrc)
    end
end

local function heuristic(tvb, pinfo, tree)
    if pinfo.dst_port ~= registered_port or tvb:len() < BTH_LEN + MRH_LEN then return false end
    if OPCODES[tvb(0, 1):uint()] == nil then return false end
    if bit.rshift(tvb(BTH_LEN, 1):uint(), 4) ~= MRC_VERSION then return false end
    mrc.dissector(tvb, pinfo, tree)
    return true
end
mrc:register_heuristic("udp", heuristic)
