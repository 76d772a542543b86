"""WebDataset tars of audio and transcripts for the CLI tests (tokens.sh).

write(PATH, SAMPLES) writes one plain tar of SAMPLES, each (key, transcript bytes) or (key,
transcript bytes, WAV bytes): <key>.wav and <key>.txt; a sample without WAV bytes gets 0.1 s
of 16 kHz silence. wav(fmt, bits, samples) makes WAV bytes (fmt 1: PCM, 3: float).
"""
import io
import struct
import tarfile


def wav(fmt=1, bits=16, samples=(0,) * 1600):
    data = struct.pack("<%d%s" % (len(samples), "h" if fmt == 1 else "f"), *samples)
    head = struct.pack("<HHIIHH", fmt, 1, 16000, 16000 * bits // 8, bits // 8, bits)
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<I", 16) +
            head + b"data" + struct.pack("<I", len(data)) + data)


def write(path, samples):
    silence = wav()
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
        for key, text, *audio in samples:
            for ext, data in (("wav", audio[0] if audio else silence), ("txt", text)):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
