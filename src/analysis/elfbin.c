// SPDX-License-Identifier: MIT
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/elfbin.h"
#include "analysis/elfimg.h"
#include "analysis/unwind.h"

#define NT_GO_BUILDID 4

struct elfbin {
	int fd;
	struct stat st;
	Elf *elf;
	GElf_Phdr *loads; /* PT_LOAD program headers */
	size_t nloads;
	struct elfbin_sym *syms;
	size_t nsyms;
	bool has_symtab;
	unsigned int machine;
	char *build_id;
	char *debuglink; /* .gnu_debuglink's file name, or NULL */
	uint32_t debuglink_crc;
	struct fde_range *fdes; /* .eh_frame's FDEs by address, read on first use */
	size_t nfdes;
	bool fdes_read;
	Dwarf_CFI *cfi; /* the same table for libdw's rules, made on first use */
	bool cfi_tried;
	size_t held; /* section bytes libelf read and holds until the end */
};

struct fde_range {
	uint64_t lo, hi;
};

static const char *machine_name(unsigned int m)
{
	switch (m) {
	case EM_386: return "i386";
	case EM_ARM: return "arm";
	case EM_AARCH64: return "aarch64";
	case EM_PPC64: return "ppc64";
	case EM_S390: return "s390x";
	case EM_RISCV: return "riscv";
	case EM_MIPS: return "mips";
	case EM_LOONGARCH: return "loongarch";
	default: return "an unknown machine";
	}
}

/* Checks the raw header before libelf sees the file, so the common ways a
 * file can be unusable get a message that names them. */
static int check_header(struct elfbin *eb, const char *path, struct rw_error *err)
{
	unsigned char buf[sizeof(Elf64_Ehdr)];
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
	uint64_t fsize = eb->st.st_size;
	ssize_t n;

	n = pread(eb->fd, buf, sizeof(buf), 0);
	if (n < 0)
		return rw_error_set(err, errno, "failed to read %s: %s", path, strerror(errno));
	if (n < SELFMAG || memcmp(buf, ELFMAG, SELFMAG))
		return rw_error_set(err, ENOEXEC, "%s is not an ELF file", path);
	if (n > EI_CLASS && buf[EI_CLASS] == ELFCLASS32)
		return rw_error_set(
			err, ENOEXEC,
			"%s is a 32-bit ELF file; only x86-64 (64-bit) binaries are supported",
			path);
	if ((size_t)n < sizeof(Elf64_Ehdr))
		return rw_error_set(err, ENOEXEC,
				    "%s is a truncated ELF file (%zd bytes, header needs %zu)",
				    path, n, sizeof(Elf64_Ehdr));
	if (buf[EI_CLASS] != ELFCLASS64 || buf[EI_DATA] != ELFDATA2LSB)
		return rw_error_set(err, ENOEXEC, "%s has an unsupported ELF class or byte order",
				    path);
	if (eh->e_machine != EM_X86_64 && eh->e_machine != EM_AARCH64)
		return rw_error_set(err, ENOEXEC,
				    "%s is built for %s (ELF machine %u), not x86-64 or aarch64; "
				    "wrong architecture",
				    path, machine_name(eh->e_machine), eh->e_machine);
	eb->machine = eh->e_machine;
	if (eh->e_type != ET_EXEC && eh->e_type != ET_DYN)
		return rw_error_set(err, ENOEXEC,
				    "%s is an ELF %s, not an executable or shared library", path,
				    eh->e_type == ET_REL    ? "object file"
				    : eh->e_type == ET_CORE ? "core file"
							    : "file of unknown type");
	if (eh->e_phnum && (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > fsize ||
			    (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > fsize - eh->e_phoff))
		return rw_error_set(
			err, ENOEXEC,
			"%s is a truncated or malformed ELF file: program headers lie past its end (%" PRIu64
			" bytes)",
			path, fsize);
	if (eh->e_shnum && (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > fsize ||
			    (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > fsize - eh->e_shoff))
		return rw_error_set(
			err, ENOEXEC,
			"%s is a truncated or malformed ELF file: section headers lie past its end (%" PRIu64
			" bytes)",
			path, fsize);
	return 0;
}

static int load_segments(struct elfbin *eb, const char *path, struct rw_error *err)
{
	size_t phnum;

	if (elf_getphdrnum(eb->elf, &phnum))
		return rw_error_set(err, ENOEXEC, "%s: malformed program headers: %s", path,
				    elf_errmsg(-1));
	eb->loads = calloc(phnum ? phnum : 1, sizeof(*eb->loads));
	if (!eb->loads)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(eb->elf, i, &ph))
			return rw_error_set(err, ENOEXEC, "%s: malformed program header %zu", path,
					    i);
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_offset > (uint64_t)eb->st.st_size ||
		    ph.p_filesz > (uint64_t)eb->st.st_size - ph.p_offset)
			return rw_error_set(
				err, ENOEXEC,
				"%s is truncated: a loadable segment at offset 0x%" PRIx64
				" extends past the end of the file",
				path, (uint64_t)ph.p_offset);
		if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr || ph.p_filesz > ph.p_memsz)
			return rw_error_set(err, ENOEXEC,
					    "%s: malformed loadable segment at 0x%" PRIx64, path,
					    (uint64_t)ph.p_vaddr);
		eb->loads[eb->nloads++] = ph;
	}
	if (!eb->nloads)
		return rw_error_set(err, ENOEXEC, "%s has no loadable segments", path);
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct elfbin_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The size in the file of section ndx (a symbol table's strings). */
static size_t section_size(Elf *elf, size_t ndx)
{
	GElf_Shdr sh;
	Elf_Scn *scn = elf_getscn(elf, ndx);

	return scn && gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS ? sh.sh_size : 0;
}

static int add_syms(struct elfbin *eb, Elf_Scn *scn, const GElf_Shdr *sh, size_t *cap)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	/* d_buf is NULL for a table without bytes (a debug file's .dynsym) */
	if (!data || !data->d_buf || !sh->sh_entsize)
		return 0;
	n = data->d_size / sizeof(Elf64_Sym);
	eb->held += data->d_size + section_size(eb->elf, sh->sh_link);
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		int type;

		if (!gelf_getsym(data, i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    !sym.st_value)
			continue;
		name = elf_safe_strptr(eb->elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		if (eb->nsyms == *cap) {
			size_t ncap = *cap ? *cap * 2 : 1024;
			void *p = realloc(eb->syms, ncap * sizeof(*eb->syms));

			if (!p)
				return -ENOMEM;
			eb->syms = p;
			*cap = ncap;
		}
		eb->syms[eb->nsyms++] = (struct elfbin_sym){
			.name = name,
			.addr = sym.st_value,
			.size = sym.st_size,
			.local = GELF_ST_BIND(sym.st_info) == STB_LOCAL,
			.ifunc = type == STT_GNU_IFUNC,
		};
	}
	return 0;
}

static char *hex(const unsigned char *p, size_t n)
{
	char *s = malloc(n * 2 + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", p[i]);
	return s;
}

static void read_build_id(struct elfbin *eb, Elf_Scn *scn)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	if (!data)
		return;
	while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		const char *name = (const char *)data->d_buf + name_off;
		const unsigned char *desc = (const unsigned char *)data->d_buf + desc_off;

		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(name, "GNU", 4) &&
		    nh.n_descsz && nh.n_descsz <= 64) {
			free(eb->build_id);
			eb->build_id = hex(desc, nh.n_descsz);
			return;
		}
		/* Go's build id is printable text; keep it unless a GNU id turns up */
		/* Go writes the note name padded: "Go\0\0", n_namesz 4 */
		if (nh.n_type == NT_GO_BUILDID && (nh.n_namesz == 3 || nh.n_namesz == 4) &&
		    !memcmp(name, "Go", 3) && nh.n_descsz && nh.n_descsz <= 256 && !eb->build_id) {
			eb->build_id = strndup((const char *)desc, nh.n_descsz);
			for (char *c = eb->build_id; c && *c; c++)
				if (*c < 0x20 || *c > 0x7e)
					*c = '?';
		}
	}
}

/* .gnu_debuglink: a file name, NUL, padding to 4 bytes, the file's CRC-32. */
static void read_debuglink(struct elfbin *eb, Elf_Scn *scn)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	const char *name;
	size_t n, crc_off;

	if (!data || !data->d_buf || data->d_size < 8 || eb->debuglink)
		return;
	name = data->d_buf;
	n = strnlen(name, data->d_size);
	crc_off = (n + 4) & ~(size_t)3;
	/* a bare file name: a path would lead anywhere in the root */
	if (!n || n > 255 || crc_off + 4 > data->d_size || memchr(name, '/', n) ||
	    !strcmp(name, ".") || !strcmp(name, ".."))
		return;
	eb->debuglink = strndup(name, n);
	memcpy(&eb->debuglink_crc, (const char *)data->d_buf + crc_off, 4);
}

static int load_sections(struct elfbin *eb, const char *path, struct rw_error *err)
{
	size_t shstrndx, cap = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(eb->elf, &shstrndx))
		return rw_error_set(err, ENOEXEC, "%s: malformed section headers: %s", path,
				    elf_errmsg(-1));
	while ((scn = elf_nextscn(eb->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return rw_error_set(err, ENOEXEC, "%s: malformed section header", path);
		if (sh.sh_type != SHT_NOBITS &&
		    (sh.sh_offset > (uint64_t)eb->st.st_size ||
		     sh.sh_size > (uint64_t)eb->st.st_size - sh.sh_offset)) {
			const char *name = elf_safe_strptr(eb->elf, shstrndx, sh.sh_name);

			return rw_error_set(
				err, ENOEXEC,
				"%s is truncated: section %s extends past the end of the file",
				path, name ? name : "?");
		}
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) {
			if (sh.sh_type == SHT_SYMTAB)
				eb->has_symtab = true;
			if (add_syms(eb, scn, &sh, &cap))
				return rw_error_set(err, ENOMEM, "out of memory");
		} else if (sh.sh_type == SHT_NOTE) {
			read_build_id(eb, scn);
		} else if (sh.sh_type == SHT_PROGBITS) {
			const char *name = elf_safe_strptr(eb->elf, shstrndx, sh.sh_name);

			if (name && !strcmp(name, ".gnu_debuglink"))
				read_debuglink(eb, scn);
		}
	}
	if (eb->nsyms) {
		size_t j = 0;

		qsort(eb->syms, eb->nsyms, sizeof(*eb->syms), sym_cmp);
		/* one name at one address: .symtab and .dynsym, or two versions
		 * of a symbol (memcpy@GLIBC_2.2.5 and memcpy@@GLIBC_2.14 where
		 * they share an entry) */
		for (size_t i = 0; i < eb->nsyms; i++) {
			if (!j || sym_cmp(&eb->syms[j - 1], &eb->syms[i]))
				eb->syms[j++] = eb->syms[i];
			else
				eb->syms[j - 1].ifunc |= eb->syms[i].ifunc;
		}
		eb->nsyms = j;
	}
	return 0;
}

static struct elfbin *open_fd(int fd, const char *path, bool debug, struct rw_error *err)
{
	struct elfbin *eb;
	int ret;

	eb = calloc(1, sizeof(*eb));
	if (!eb) {
		close(fd);
		rw_error_set(err, ENOMEM, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	eb->fd = fd;
	if (fstat(fd, &eb->st)) {
		ret = rw_error_set(err, errno, "failed to stat %s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(eb->st.st_mode)) {
		ret = rw_error_set(err, EINVAL, "%s is not a regular file", path);
		goto fail;
	}
	ret = check_header(eb, path, err);
	if (ret)
		goto fail;
	elf_version(EV_CURRENT);
	/* ELF_C_READ: libelf reads what we ask for, no mmap of hostile files */
	eb->elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!eb->elf || elf_kind(eb->elf) != ELF_K_ELF) {
		ret = rw_error_set(err, ENOEXEC, "%s is a malformed ELF file: %s", path,
				   elf_errmsg(-1));
		goto fail;
	}
	ret = debug ? 0 : load_segments(eb, path, err);
	if (!ret)
		ret = load_sections(eb, path, err);
	if (ret)
		goto fail;
	return eb;
fail:
	elfbin__free(eb);
	errno = -ret;
	return NULL;
}

struct elfbin *elfbin__open_fd(int fd, const char *path, struct rw_error *err)
{
	return open_fd(fd, path, false, err);
}

struct elfbin *elfbin__open_debug_fd(int fd, const char *path, struct rw_error *err)
{
	return open_fd(fd, path, true, err);
}

struct elfbin *elfbin__open(const char *path, struct rw_error *err)
{
	/* O_NONBLOCK: opening a FIFO for reading waits for a writer (open_fd refuses it) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0) {
		int e = errno;

		rw_error_set(err, e, "failed to open %s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	return elfbin__open_fd(fd, path, err);
}

void elfbin__free(struct elfbin *eb)
{
	if (!eb)
		return;
	free(eb->fdes);
	if (eb->cfi)
		dwarf_cfi_end(eb->cfi);
	if (eb->elf)
		elf_end(eb->elf);
	if (eb->fd >= 0)
		close(eb->fd);
	free(eb->loads);
	free(eb->syms);
	free(eb->build_id);
	free(eb->debuglink);
	free(eb);
}

Elf *elfbin__elf(const struct elfbin *eb)
{
	return eb->elf;
}

size_t elfbin__bytes(const struct elfbin *eb)
{
	if (!eb)
		return 0;
	return sizeof(*eb) + eb->held + eb->nsyms * sizeof(*eb->syms) +
	       eb->nfdes * sizeof(*eb->fdes) + eb->nloads * sizeof(*eb->loads);
}

unsigned int elfbin__machine(const struct elfbin *eb)
{
	return eb->machine;
}

bool elfbin__has_symtab(const struct elfbin *eb)
{
	return eb->has_symtab;
}

const char *elfbin__build_id(const struct elfbin *eb)
{
	return eb->build_id;
}

const char *elfbin__debuglink(const struct elfbin *eb, uint32_t *ret_crc)
{
	*ret_crc = eb->debuglink_crc;
	return eb->debuglink;
}

int elfbin__fd(const struct elfbin *eb)
{
	return eb->fd;
}

const struct elfbin_sym *elfbin__syms(const struct elfbin *eb, size_t *ret_n)
{
	*ret_n = eb->nsyms;
	return eb->syms;
}

static const GElf_Phdr *find_load(const struct elfbin *eb, uint64_t addr, uint64_t len)
{
	for (size_t i = 0; i < eb->nloads; i++) {
		const GElf_Phdr *ph = &eb->loads[i];

		if (addr >= ph->p_vaddr && addr - ph->p_vaddr <= ph->p_filesz &&
		    len <= ph->p_filesz - (addr - ph->p_vaddr))
			return ph;
	}
	return NULL;
}

int elfbin__addr_to_offset(const struct elfbin *eb, uint64_t addr, uint64_t *ret_off)
{
	const GElf_Phdr *ph = find_load(eb, addr, 1);

	if (!ph)
		return -ERANGE;
	*ret_off = ph->p_offset + (addr - ph->p_vaddr);
	return 0;
}

int elfbin__offset_to_addr(const struct elfbin *eb, uint64_t off, uint64_t *ret_addr)
{
	/* code is what gets symbolized: prefer it where a page is shared */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < eb->nloads; i++) {
			const GElf_Phdr *ph = &eb->loads[i];

			if (!pass && !(ph->p_flags & PF_X))
				continue;
			if (off >= ph->p_offset && off - ph->p_offset < ph->p_filesz) {
				*ret_addr = ph->p_vaddr + (off - ph->p_offset);
				return 0;
			}
		}
	}
	return -ERANGE;
}

bool elfbin__is_code(const struct elfbin *eb, uint64_t addr, uint64_t len)
{
	const GElf_Phdr *ph = find_load(eb, addr, len);

	return ph && (ph->p_flags & PF_X);
}

int elfbin__read(const struct elfbin *eb, uint64_t addr, void *buf, size_t len)
{
	const GElf_Phdr *ph = find_load(eb, addr, len);
	size_t done = 0;

	if (!ph)
		return -ERANGE;
	while (done < len) {
		ssize_t n = pread(eb->fd, (char *)buf + done, len - done,
				  ph->p_offset + (addr - ph->p_vaddr) + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file shrank under us */
		done += n;
	}
	return 0;
}

/* DW_EH_PE_* pointer encodings of .eh_frame (the LSB's exception frames). */
#define EH_PE_OMIT 0xff
#define EH_PE_FORMAT 0x0f
#define EH_PE_PCREL 0x10
#define EH_PE_APPLY 0x70

/* Size of an encoded value of format enc, or 0 for one we do not read. */
static size_t eh_pe_size(uint8_t enc)
{
	switch (enc & EH_PE_FORMAT) {
	case 0x00: return 8; /* absptr (64-bit) */
	case 0x02:
	case 0x0a: return 2;
	case 0x03:
	case 0x0b: return 4;
	case 0x04:
	case 0x0c: return 8;
	default: return 0; /* LEB128: not used for FDE addresses by any toolchain */
	}
}

/* Reads an encoded value at p (bounds checked by the caller); signed formats are sign-extended. */
static uint64_t eh_pe_read(const uint8_t *p, uint8_t enc)
{
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (enc & EH_PE_FORMAT) {
	case 0x02: memcpy(&u16, p, 2); return u16;
	case 0x0a: memcpy(&u16, p, 2); return (uint64_t)(int64_t)(int16_t)u16;
	case 0x03: memcpy(&u32, p, 4); return u32;
	case 0x0b: memcpy(&u32, p, 4); return (uint64_t)(int64_t)(int32_t)u32;
	default: memcpy(&u64, p, 8); return u64;
	}
}

/*
 * The FDE pointer encoding a CIE's augmentation names ('R' in a "z..."
 * string), DW_EH_PE_absptr without one; EH_PE_OMIT when the string holds
 * something that cannot be skipped.
 */
static uint8_t cie_fde_encoding(const Dwarf_CIE *cie)
{
	const uint8_t *p = cie->augmentation_data, *end = p + cie->augmentation_data_size;
	const char *a = cie->augmentation;

	if (!a || a[0] != 'z')
		return 0;
	for (a++; *a; a++) {
		size_t n;

		switch (*a) {
		case 'R': return p < end ? *p : EH_PE_OMIT;
		case 'L': p++; break;
		case 'P':
			if (p >= end || !(n = eh_pe_size(*p)))
				return EH_PE_OMIT;
			p += 1 + n;
			break;
		case 'S':
		case 'B': break;
		default: return EH_PE_OMIT;
		}
	}
	return 0;
}

static int fde_cmp(const void *a, const void *b)
{
	const struct fde_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The [lo, hi) of one FDE, from its CIE's encoding; false when it cannot be read. */
static bool fde_range(const Elf_Data *d, uint64_t sec_addr, const Dwarf_FDE *fde, uint8_t enc,
		      struct fde_range *ret)
{
	size_t n = eh_pe_size(enc);
	uint64_t lo, len;

	if (enc == EH_PE_OMIT || !n || fde->end < fde->start ||
	    (size_t)(fde->end - fde->start) < 2 * n)
		return false;
	lo = eh_pe_read(fde->start, enc);
	len = eh_pe_read(fde->start + n, enc & EH_PE_FORMAT);
	if ((enc & EH_PE_APPLY) == EH_PE_PCREL)
		lo += sec_addr + (uint64_t)(fde->start - (const uint8_t *)d->d_buf);
	else if (enc & EH_PE_APPLY)
		return false; /* datarel, textrel, funcrel: not emitted for .eh_frame FDEs */
	if (!len || lo + len < lo)
		return false;
	*ret = (struct fde_range){ lo, lo + len };
	return true;
}

/* Every FDE of .eh_frame, sorted; none when the section is missing or unreadable. */
static int read_fdes(struct elfbin *eb)
{
	const unsigned char *ident = (const unsigned char *)elf_getident(eb->elf, NULL);
	Dwarf_Off off = 0, next, cie_off = (Dwarf_Off)-1;
	Elf_Scn *scn = NULL;
	Elf_Data *d = NULL;
	uint64_t sec_addr = 0;
	size_t shstrndx, cap = 0;
	uint8_t enc = EH_PE_OMIT;
	bool sig = false;
	GElf_Shdr sh;

	if (!ident || elf_getshdrstrndx(eb->elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(eb->elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_safe_strptr(eb->elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".eh_frame")) {
			d = elf_getdata(scn, NULL);
			sec_addr = sh.sh_addr;
			break;
		}
	}
	if (!d || !d->d_buf)
		return 0;
	eb->held += d->d_size;
	/* each entry is at least 4 bytes long and next > off: the loop ends */
	for (Dwarf_CFI_Entry e; dwarf_next_cfi(ident, d, true, off, &next, &e) == 0 && next > off;
	     off = next) {
		struct fde_range r;

		if (dwarf_cfi_cie_p(&e))
			continue;
		if (e.fde.CIE_pointer != cie_off) {
			Dwarf_CFI_Entry cie;
			Dwarf_Off unused;

			cie_off = e.fde.CIE_pointer;
			enc = EH_PE_OMIT;
			sig = false;
			if (dwarf_next_cfi(ident, d, true, cie_off, &unused, &cie) == 0 &&
			    dwarf_cfi_cie_p(&cie)) {
				enc = cie_fde_encoding(&cie.cie);
				sig = cie.cie.augmentation && strchr(cie.cie.augmentation, 'S');
			}
		}
		/*
		 * A signal frame's ('S') FDE starts a byte before its code (glibc's
		 * __restore_rt), inside the instruction before: not a function start.
		 */
		if (sig || !fde_range(d, sec_addr, &e.fde, enc, &r))
			continue;
		if (eb->nfdes == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			void *p = realloc(eb->fdes, ncap * sizeof(*eb->fdes));

			if (!p)
				return -ENOMEM;
			eb->fdes = p;
			cap = ncap;
		}
		eb->fdes[eb->nfdes++] = r;
	}
	if (eb->nfdes)
		qsort(eb->fdes, eb->nfdes, sizeof(*eb->fdes), fde_cmp);
	return 0;
}

/* The FDEs, read on first use; -ENOMEM. */
static int fdes_load(struct elfbin *eb)
{
	if (eb->fdes_read)
		return 0;
	eb->fdes_read = true;
	if (!read_fdes(eb))
		return 0;
	free(eb->fdes);
	eb->fdes = NULL;
	eb->nfdes = 0;
	return -ENOMEM;
}

/* The index of the first FDE starting at or after addr (nfdes: none). */
static size_t fde_lower_bound(const struct elfbin *eb, uint64_t addr)
{
	size_t lo = 0, hi = eb->nfdes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (eb->fdes[mid].lo < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int elfbin__fde_start_before(struct elfbin *eb, uint64_t addr, uint64_t *ret_lo)
{
	size_t i;

	if (fdes_load(eb))
		return -ENOMEM;
	i = fde_lower_bound(eb, addr);
	if (i < eb->nfdes && eb->fdes[i].lo == addr)
		i++;
	if (!i)
		return -ENOENT;
	*ret_lo = eb->fdes[i - 1].lo;
	return 0;
}

int elfbin__fde_at(struct elfbin *eb, uint64_t addr, uint64_t *ret_lo, uint64_t *ret_hi)
{
	size_t lo;

	if (fdes_load(eb))
		return -ENOMEM;
	lo = fde_lower_bound(eb, addr);
	if (lo == eb->nfdes || eb->fdes[lo].lo != addr)
		return -ENOENT;
	*ret_lo = eb->fdes[lo].lo;
	*ret_hi = eb->fdes[lo].hi;
	return 0;
}

/* x86-64 DWARF register numbers: the stack pointer, and those a callee must preserve. */
#define DWARF_REG_RSP 7
static const int callee_saved[] = { 3 /* rbx */, 6 /* rbp */, 12, 13, 14, 15 /* r12-r15 */ };

int elfbin__entry_state_at(struct elfbin *eb, uint64_t addr)
{
	Dwarf_Op mem[3], *ops;
	Dwarf_Frame *frame = NULL;
	size_t nops;
	int ret = 1;

	if (!eb->cfi_tried) {
		eb->cfi_tried = true;
		/* a table naming huge registers makes libdw allocate for each:
		 * checked first, as the unwinder does (unwind.h) */
		if (unwind__section_ok(eb->elf, ".eh_frame", true))
			eb->cfi = dwarf_getcfi_elf(eb->elf);
	}
	if (!eb->cfi || dwarf_cfi_addrframe(eb->cfi, addr, &frame) != 0)
		return -ENOENT;
	/* CFA = RSP + 8: the return address is all the stack holds */
	if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1 || ops[0].atom != DW_OP_bregx ||
	    ops[0].number != DWARF_REG_RSP || ops[0].number2 != 8)
		ret = 0;
	for (size_t i = 0; ret && i < sizeof(callee_saved) / sizeof(callee_saved[0]); i++)
		if (dwarf_frame_register(frame, callee_saved[i], mem, &ops, &nops) != 0 || nops)
			ret = 0; /* saved on the stack: a frame is set up */
	free(frame);
	return ret;
}

int elfbin__code_section_before(const struct elfbin *eb, uint64_t addr, uint64_t *ret_start)
{
	Elf_Scn *scn = NULL;
	bool found = false;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(eb->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR) ||
		    sh.sh_addr > addr || (found && sh.sh_addr <= *ret_start))
			continue;
		*ret_start = sh.sh_addr;
		found = true;
	}
	return found ? 0 : -ENOENT;
}

bool elfbin__in_plt(const struct elfbin *eb, uint64_t addr)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(eb->elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(eb->elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || addr < sh.sh_addr ||
		    addr - sh.sh_addr >= sh.sh_size)
			continue;
		name = elf_safe_strptr(eb->elf, shstrndx, sh.sh_name);
		return name && !strncmp(name, ".plt", 4);
	}
	return false;
}
