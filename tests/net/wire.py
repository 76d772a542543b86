#!/usr/bin/env python3
"""A hub with latency and loss, for kernels without tc netem: run in the switch namespace of
tests/net/netns.sh, it reads every Ethernet frame that arrives on the switch's ends of the
veth links and sends it out of the others DELAY_MS later, losing each copy with
probability LOSS_PERCENT / 100 (seeded, so a run is repeatable up to timing).

    wire.py READY_FILE DELAY_MS LOSS_PERCENT SEED IFACE...
"""
import heapq
import random
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def with_checksum(frame):
    """A veth end hands over TCP and UDP segments with the checksum left to the hardware;
    sent on through another veth as they are, the receiver would drop them: fill it in."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":  # IPv4 only
        return frame
    ihl = (frame[14] & 0x0F) * 4
    proto, total = frame[23], struct.unpack("!H", frame[16:18])[0]
    at = {6: 16, 17: 6}.get(proto)  # offset of the checksum in TCP, UDP
    start, end = 14 + ihl, 14 + total
    if at is None or end > len(frame) or end - start < at + 2:
        return frame
    seg = bytearray(frame[start:end])
    seg[at : at + 2] = b"\0\0"
    pseudo = frame[26:34] + struct.pack("!BBH", 0, proto, len(seg))
    value = checksum(pseudo + bytes(seg)) or (0xFFFF if proto == 17 else 0)
    seg[at : at + 2] = struct.pack("!H", value)
    return frame[:start] + bytes(seg) + frame[end:]


def main():
    ready, delay_ms, loss, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    socks = []
    for name in sys.argv[5:]:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        s.setblocking(False)
        socks.append(s)
    rng = random.Random(seed)
    due = []  # (time, sequence, socket, frame): the frames on their way
    seq = 0
    open(ready, "w").close()
    while True:
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, out, frame = heapq.heappop(due)
            try:
                out.send(frame)
            except OSError:  # that end's link is down: the frame is lost
                pass
        wait = max(0.0, due[0][0] - now) if due else 1.0
        readable, _, _ = select.select(socks, [], [], wait)
        for s in readable:
            while True:
                try:
                    frame, addr = s.recvfrom(65536)
                except OSError:  # nothing more, or that end's link went down
                    break
                if addr[2] == PACKET_OUTGOING:  # what this hub itself sent
                    continue
                frame = with_checksum(frame)
                for out in socks:
                    if out is not s and rng.random() * 100 >= loss:
                        seq += 1
                        heapq.heappush(due, (time.monotonic() + delay_ms / 1000, seq, out, frame))


if __name__ == "__main__":
    main()
