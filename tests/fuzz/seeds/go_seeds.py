# Seed corpus for the fuzz targets: small Go function tables of every layout
# and small hand-made Go ELF files (symbols, stripped, PIE relocations, no
# section headers). usage: go_seeds.py OUTDIR
import struct, sys, os
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
M116, M118, M120 = 0xfffffffa, 0xfffffff0, 0xfffffff1

def table(magic, funcs, end, text):
    old = magic == M116
    words = 7 if old else 8; fld = 8 if old else 4
    recsz = 40 if magic == M118 else 44; fid_at = 36 if magic == M118 else 40
    hdr = 8 + words * 8
    names = b''.join(n.encode() + b'\0' for _, n, _ in funcs)
    ftab = (hdr + len(names) + 12 + 7) & ~7
    n = len(funcs)
    size = ftab + (2 * n + 1) * fld + n * recsz
    b = bytearray(size)
    struct.pack_into('<IBBBB', b, 0, magic, 0, 0, 1, 8)
    struct.pack_into('<QQ', b, 8, n, 1)
    offs = [hdr, hdr + len(names), hdr + len(names) + 4, hdr + len(names) + 8, ftab]
    if old:
        struct.pack_into('<5Q', b, 24, *offs)
    else:
        struct.pack_into('<Q5Q', b, 24, text, *offs)
    b[hdr:hdr + len(names)] = names
    pos = 0
    for i, (off, name, fid) in enumerate(funcs):
        rec = ftab + (2 * n + 1) * fld + i * recsz
        e = text + off if old else off
        if old:
            struct.pack_into('<QQ', b, ftab + 16 * i, e, rec - ftab)
            struct.pack_into('<QI', b, rec, e, pos)
        else:
            struct.pack_into('<II', b, ftab + 8 * i, e, rec - ftab)
            struct.pack_into('<II', b, rec, e, pos)
        b[rec + fid_at] = fid
        pos += len(name) + 1
    if old:
        struct.pack_into('<Q', b, ftab + 16 * n, text + end)
    else:
        struct.pack_into('<I', b, ftab + 8 * n, end)
    return bytes(b), offs

funcs = [(0, 'runtime.text', 0), (0x20, 'main.main', 0), (0x60, 'main.(*Cart).Add', 0),
         (0xa0, 'main.main', 23), (0xc0, 'runtime.osyield', 0), (0xe0, 'runtime.osyield', 23),
         (0x100, 'main.Map[go.shape.int]', 0)]
TEXT = 0x401000
for m in (M116, M118, M120):
    t, _ = table(m, funcs, 0x140, TEXT)
    open(f'{out}/tab-{m:x}', 'wb').write(struct.pack('<Q', 0) + t)
    open(f'{out}/tab-{m:x}-text', 'wb').write(struct.pack('<Q', 0x2c400) + t)

# ---- minimal ELF files ----
def elf(sections, syms=None, rela=None):
    """sections: list of (name, type, flags, addr, data). Returns bytes."""
    shstr = b'\0'; names = []
    allsecs = list(sections)
    strtab = b'\0'; symtab = b'\0' * 24
    if syms:
        for name, val in syms:
            off = len(strtab); strtab += name.encode() + b'\0'
            symtab += struct.pack('<IBBHQQ', off, 0, 0, 1, val, 0)
    body = bytearray(64)
    shdrs = []
    def add(name, typ, flags, addr, data, link=0, entsize=0, align=8):
        nonlocal shstr
        while len(body) % 8: body.append(0)
        off = len(body); body.extend(data)
        noff = len(shstr); shstr += name.encode() + b'\0'
        shdrs.append((noff, typ, flags, addr, off, len(data), link, 0, align, entsize))
    shdrs.append((0,) * 10)
    for s in allsecs:
        add(*s)
    if rela:
        add('.rela', 4, 2, 0, b''.join(struct.pack('<QQq', o, 8, a) for o, a in rela), entsize=24)
    if syms:
        strndx = len(shdrs) + 1
        add('.symtab', 2, 0, 0, symtab, link=strndx, entsize=24)
        add('.strtab', 3, 0, 0, strtab)
    shstrndx = len(shdrs)
    add('.shstrtab', 3, 0, 0, shstr + b'.shstrtab\0')
    # fix the name of .shstrtab itself
    n = shdrs[-1]; shdrs[-1] = (len(shstr),) + n[1:]
    while len(body) % 8: body.append(0)
    shoff = len(body)
    for sh in shdrs:
        body += struct.pack('<IIQQQQIIQQ', *sh)
    ident = b'\x7fELF' + bytes([2, 1, 1]) + b'\0' * 9
    struct.pack_into('<16sHHIQQQIHHHHHH', body, 0, ident, 2, 62, 1, TEXT, 0, shoff, 0, 64, 56, 0, 64, len(shdrs), shstrndx)
    return bytes(body)

def buildinfo_inline(ver):
    h = b'\xff Go buildinf:' + bytes([8, 2]) + b'\0' * 16
    return h + bytes([len(ver)]) + ver.encode() + b'\0'

PCLN = 0x4d0000; MD = 0x580000; BI = 0x570000
def moduledata(offs, text):
    b = bytearray(0x250)
    struct.pack_into('<Q', b, 0, PCLN)
    struct.pack_into('<Q', b, 8, PCLN + offs[0])
    struct.pack_into('<Q', b, 0x68, PCLN + offs[4]); struct.pack_into('<Q', b, 0x80, PCLN + offs[4])
    struct.pack_into('<Q', b, 0x88, len(funcs) + 1)
    struct.pack_into('<Q', b, 0xb0, text)
    return bytes(b)

text_sec = ('.text', 1, 6, TEXT, b'\xcc' * 0x140)
# go1.26 style: textStart 0, symtab with runtime.text
t0, offs = table(M120, funcs, 0x140, 0)
md = moduledata(offs, TEXT)
open(f'{out}/elf-126-sym', 'wb').write(elf([text_sec, ('.gopclntab', 1, 2, PCLN, t0),
    ('.go.buildinfo', 1, 3, BI, buildinfo_inline('go1.26.8')), ('.go.module', 1, 3, MD, md)],
    syms=[('runtime.text', TEXT), ('runtime.pclntab', PCLN), ('runtime.epclntab', PCLN + len(t0))]))
# stripped: moduledata only
open(f'{out}/elf-126-stripped', 'wb').write(elf([text_sec, ('.gopclntab', 1, 2, PCLN, t0),
    ('.go.buildinfo', 1, 3, BI, buildinfo_inline('go1.26.8')), ('.go.module', 1, 3, MD, md)]))
# stripped PIE, lld style: zeros in the file, relocations carry the values
mdz = bytes(0x250)
open(f'{out}/elf-126-pie-rela', 'wb').write(elf([text_sec, ('.gopclntab', 1, 2, PCLN, t0),
    ('.go.buildinfo', 1, 3, BI, buildinfo_inline('go1.26.8')), ('.noptrdata', 1, 3, MD, mdz)],
    rela=[(MD, PCLN), (MD + 8, PCLN + offs[0]), (MD + 0x68, PCLN + offs[4]), (MD + 0x80, PCLN + offs[4]), (MD + 0xb0, TEXT)]))
# no .gopclntab name (externally linked PIE of go1.21-1.23), stripped: scan
t1, offs1 = table(M120, funcs, 0x140, TEXT)
# old-format build info: pointer to a string header
bi_old = bytearray(b'\xff Go buildinf:' + bytes([8, 0]) + struct.pack('<QQ', BI + 32, BI + 32) + struct.pack('<QQ', BI + 48, 9) + b'go1.16.15' + b'\0' * 7)
open(f'{out}/elf-121-scan', 'wb').write(elf([text_sec, ('.data.rel.ro', 1, 3, PCLN, t1),
    ('.go.buildinfo', 1, 3, BI, bytes(bi_old)), ('.noptrdata', 1, 3, MD, moduledata(offs1, TEXT))]))
t2, offs2 = table(M116, funcs, 0x140, TEXT)
open(f'{out}/elf-116', 'wb').write(elf([text_sec, ('.gopclntab', 1, 2, PCLN, t2),
    ('.go.buildinfo', 1, 3, BI, bytes(bi_old))]))

# program headers only (sstrip): PT_LOADs over the same bytes, no sections
def phdr_only(sections):
    body = bytearray(64 + 56 * len(sections))
    ph = []
    for name, typ, flags, addr, data in sections:
        while len(body) % 16: body.append(0)
        off = len(body); body.extend(data)
        pflags = 4 | (2 if flags & 1 else 0) | (1 if flags & 4 else 0)
        ph.append(struct.pack('<IIQQQQQQ', 1, pflags, off, addr, addr, len(data), len(data), 0x10))
    body[64:64 + 56 * len(ph)] = b''.join(ph)
    ident = b'\x7fELF' + bytes([2, 1, 1]) + b'\0' * 9
    struct.pack_into('<16sHHIQQQIHHHHHH', body, 0, ident, 2, 62, 1, TEXT, 64, 0, 0, 64, 56, len(ph), 64, 0, 0)
    return bytes(body)
open(f'{out}/elf-126-nosections', 'wb').write(phdr_only([text_sec, ('.gopclntab', 1, 2, PCLN, t0),
    ('.go.buildinfo', 1, 3, BI, buildinfo_inline('go1.26.8')), ('.go.module', 1, 3, MD, md)]))
