#!/usr/bin/env python3
# Seeds of the integrity_metadata target from the images the kernel test
# kernel_integrity_format makes (run it with RAMPART_KEEP_TEST_DIRS=1 and
# pass its directory): each image's superblock area as a clean close
# leaves it, and, from the copy taken before the close (what a crash
# leaves), the superblock area, the first section's number (32-bit
# little-endian) and journal sections: sections 0 and 1 where they are
# small, else the section with the most entries.
# Usage: fuzz/make_integrity_seeds.py KEPT-TEST-DIR fuzz/corpus/integrity_metadata
import struct, sys, os
share, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for name in sorted(os.listdir(share)):
    if not name.endswith('-crash.img'): continue
    b = open(os.path.join(share, name), 'rb').read()
    # LUKS2: cryptsetup's default data offset (16 MiB).
    start = 32768*512 if name.startswith('luks') else 0
    sb = b[start:start+4096]
    if sb[:8] != b'integrt\0':
        print('no sb', name); continue
    ver, li, tag, secs, prov, flags, lspb, lbpb = struct.unpack('<BBHIQIBB', sb[8:30])
    spb = 1 << lspb
    entry = (8 + 8*spb + tag + 7)//8*8
    space = 504 - (8 if flags & 1 else 0)
    eps = space // entry
    sec_entries = eps*8
    sec_sectors = (sec_entries << lspb) + 8
    sec_bytes = sec_sectors*512
    best, best_used = 0, -1
    for i in range(secs):
        s = b[start+4096+i*sec_bytes:start+4096+(i+1)*sec_bytes]
        used = 0
        for n in range(sec_entries):
            off = (n % 8)*512 + (n//8)*entry
            hi = struct.unpack('<I', s[off+4:off+8])[0]
            if hi != 0xffffffff: used += 1
        if used > best_used: best, best_used = i, used
    base = name[:-len('-crash.img')]
    clean = open(os.path.join(share, base + '.img'), 'rb').read()[start:start+4096]
    open(os.path.join(out, base + '-superblock'), 'wb').write(clean)
    sec = lambda i: b[start+4096+i*sec_bytes:start+4096+(i+1)*sec_bytes]
    if sec_bytes <= 50000 and secs >= 2 and best_used > 0:
        open(os.path.join(out, base + '-crash-sections0-1'), 'wb').write(sb + struct.pack('<I', 0) + sec(0) + sec(1))
    elif best_used > 0 or flags & 4:
        # The section with the most entries (bitmap mode: the dirty bitmap).
        open(os.path.join(out, base + '-crash-section%d' % best), 'wb').write(sb + struct.pack('<I', best) + sec(best))
    print(base, 'v%d tag %d secs %d prov %d flags %#x sec_bytes %d best %d used %d' % (ver, tag, secs, prov, flags, sec_bytes, best, best_used))
