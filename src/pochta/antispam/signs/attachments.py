"""Dangerous attachments (seed 000): what a file's name and first bytes say it is. Pure.

- dangerous: a name ending in a type that runs code when opened (.exe .scr .js .vbs .bat .cmd
  .jar .hta .iso .img .lnk .apk ...), or a Windows executable (MZ and PE headers) under any
  name;
- double extension: a harmless-looking type before a dangerous one (``invoice.pdf.exe``,
  also padded with spaces) or a right-to-left override character that reverses how the name
  reads (``invoice\u202efdp.exe`` shows as ``invoiceexe.pdf``);
- macros: Office types that carry macros (.docm .xlsm .pptm ...), or an OOXML file (.docx,
  .xlsx) that contains a VBA project;
- archives: a ZIP whose listing (read from memory, at most :data:`MAX_MEMBERS` names, no
  decompression) holds a dangerous or macro file. RAR and 7z are not opened.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass

MAX_MEMBERS = 1000
MAX_ZIP_BYTES = 50 * 1024 * 1024
RLO = "\u202e"



def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


DANGEROUS = _words(
    "exe scr js jse vbs vbe bat cmd com pif jar hta iso img msi msp ps1 psm1 lnk reg cpl wsf wsh"
    " scf vhd vhdx appx msix chm dll sct xll url library-ms application gadget apk inf"
)
MACRO = _words("docm dotm xlsm xltm xlam xlsb pptm potm ppam ppsm sldm")
LOOKS_HARMLESS = _words(
    "pdf doc docx xls xlsx ppt pptx txt rtf odt ods csv jpg jpeg png gif bmp tif tiff zip rar"
    " 7z htm html mp3 mp4 avi mov wav eml msg xml"
)
OOXML = _words("docx dotx xlsx xltx pptx potx ppsx")


@dataclass(frozen=True, slots=True)
class FileVerdict:
    name: str
    dangerous: str = ""  # why the file itself is dangerous; "" when it is not
    double_extension: bool = False
    macro: bool = False
    archive_members: tuple[str, ...] = ()  # dangerous names inside an archive


def extension(name: str) -> str:
    base = name.strip().rstrip(". ").lower()
    return base.rpartition(".")[2].strip() if "." in base else ""


def is_windows_executable(content: bytes) -> bool:
    """An MZ header whose e_lfanew points at a PE signature."""
    if len(content) < 0x40 or content[:2] != b"MZ":
        return False
    offset = int.from_bytes(content[0x3C:0x40], "little")
    return content[offset : offset + 4] == b"PE\0\0"


def _double(name: str) -> bool:
    if RLO in name:
        return True
    parts = [p.strip() for p in name.strip().rstrip(". ").lower().split(".")]
    return len(parts) >= 3 and parts[-1] in DANGEROUS and parts[-2] in LOOKS_HARMLESS


def inspect(name: str | None, content_type: str, content: bytes) -> FileVerdict:
    shown = (name or "").strip()
    ext = extension(shown)
    dangerous = ""
    if ext in DANGEROUS:
        dangerous = f".{ext}"
    elif is_windows_executable(content):
        dangerous = "Windows executable under another name"
    elif content_type in ("application/x-msdownload", "application/x-msdos-program"):
        dangerous = content_type
    macro = ext in MACRO
    members: tuple[str, ...] = ()
    if content[:4] == b"PK\x03\x04" and len(content) <= MAX_ZIP_BYTES:
        names = _zip_names(content)
        if ext in OOXML or ext in MACRO:
            macro = macro or any(n.lower().endswith("vbaproject.bin") for n in names)
        else:
            members = tuple(n for n in names if _risky_member(n))[:5]
    return FileVerdict(shown or f"({content_type})", dangerous, _double(shown), macro, members)


def _risky_member(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    ext = extension(base)
    return ext in DANGEROUS or ext in MACRO or _double(base)


def _zip_names(content: bytes) -> list[str]:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as zf:
            return [info.filename for info in zf.infolist()[:MAX_MEMBERS]]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        return []


def inspect_all(files: Iterable[tuple[str | None, str, bytes]]) -> list[FileVerdict]:
    return [inspect(name, ctype, content) for name, ctype, content in files]
