//! Memory for what is held until it is written: the stream's blocks (spliced in place) and a
//! whole `ResourceList`.
//!
//! Output is all or nothing, so the stream is held whole, and holding it costs a page fault
//! for every page it fills. Where the kernel offers transparent huge pages to memory that
//! asks for them (Linux, mode `madvise` or `always`), the held bytes live in an anonymous
//! mapping advised for huge pages: one fault maps 2 MiB instead of 4 KiB. Elsewhere (huge
//! pages off, macOS, Windows) they live in ordinary zeroed heap memory.
//!
//! Either way the bytes are read straight into their room, and a room is never moved while it
//! fills: a mapped room reserves more address space than a block will likely need (pages are
//! only backed once written), so it is copied into a larger one only for a document larger
//! than that.

use std::io::{self, Read};
use std::ops::{Deref, DerefMut};

/// The size of a transparent huge page (x86-64, and arm64 with 4 KiB base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// The address space a mapped room reserves at least: more than any block but one holding a
/// document larger than it; it costs no memory until written.
#[cfg(target_os = "linux")]
const MAPPED_ROOM: usize = 64 << 20;

/// What kind of memory holds the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Ordinary heap memory.
    Ordinary,
    /// An anonymous mapping advised for huge pages past its first `ordinary` bytes (rounded
    /// up to a huge page), so that a short input is not charged a whole huge page.
    Huge { ordinary: usize },
}

impl Pages {
    /// Huge pages past the first `ordinary` bytes where the kernel offers them, ordinary
    /// pages elsewhere.
    pub fn offered(ordinary: usize) -> Pages {
        if huge_pages_offered() {
            Pages::Huge { ordinary }
        } else {
            Pages::Ordinary
        }
    }
}

/// Whether memory advised for transparent huge pages gets them: the mode in
/// `/sys/kernel/mm/transparent_hugepage/enabled` is `always` or `madvise` (read once).
#[cfg(target_os = "linux")]
pub fn huge_pages_offered() -> bool {
    static OFFERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFFERED.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|mode| thp_mode_offers_huge_pages(&mode))
    })
}

/// Without Linux's transparent huge pages, ordinary pages.
#[cfg(not(target_os = "linux"))]
pub fn huge_pages_offered() -> bool {
    false
}

/// The selected mode is the bracketed word: `always [madvise] never`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn thp_mode_offers_huge_pages(mode: &str) -> bool {
    mode.contains("[always]") || mode.contains("[madvise]")
}

/// Bytes held in a room that is filled in place: the first `len` bytes of the room are
/// held, the rest is zeroed room to read into.
#[derive(Default)]
pub struct HeldBytes {
    room: Room,
    len: usize,
}

enum Room {
    /// Zeroed heap memory (large rooms come zeroed from the system, untouched).
    Heap(Vec<u8>),
    /// An anonymous mapping; the room is `map[start..start + capacity]`, `start` putting it
    /// on a huge page's boundary.
    #[cfg(target_os = "linux")]
    Mapped {
        map: memmap2::MmapMut,
        start: usize,
        capacity: usize,
        ordinary: usize,
    },
}

impl Default for Room {
    fn default() -> Self {
        Room::Heap(Vec::new())
    }
}

impl Room {
    fn new(capacity: usize, pages: Pages) -> Room {
        match pages {
            Pages::Ordinary => Room::Heap(vec![0; capacity]),
            #[cfg(target_os = "linux")]
            Pages::Huge { ordinary } => Room::mapped(capacity, ordinary)
                // Huge pages only make holding cheaper: without the mapping (an address
                // space limit, strict overcommit), the heap holds the bytes.
                .unwrap_or_else(|_| Room::Heap(vec![0; capacity])),
            #[cfg(not(target_os = "linux"))]
            Pages::Huge { .. } => Room::Heap(vec![0; capacity]),
        }
    }

    #[cfg(target_os = "linux")]
    fn mapped(capacity: usize, ordinary: usize) -> io::Result<Room> {
        let capacity = capacity.max(MAPPED_ROOM).next_multiple_of(HUGE_PAGE);
        // One huge page more than the room, to start the room on a huge page's boundary
        // wherever the kernel puts the mapping.
        let map = memmap2::MmapOptions::new()
            .len(capacity + HUGE_PAGE)
            .no_reserve_swap()
            .map_anon()?;
        let address = map.as_ptr() as usize;
        let start = address.next_multiple_of(HUGE_PAGE) - address;
        let ordinary = ordinary.next_multiple_of(HUGE_PAGE).min(capacity);
        if ordinary < capacity {
            map.advise_range(
                memmap2::Advice::HugePage,
                start + ordinary,
                capacity - ordinary,
            )?;
        }
        Ok(Room::Mapped {
            map,
            start,
            capacity,
            ordinary,
        })
    }

    fn pages(&self) -> Pages {
        match self {
            Room::Heap(_) => Pages::Ordinary,
            #[cfg(target_os = "linux")]
            Room::Mapped { ordinary, .. } => Pages::Huge {
                ordinary: *ordinary,
            },
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Room::Heap(bytes) => bytes,
            #[cfg(target_os = "linux")]
            Room::Mapped {
                map,
                start,
                capacity,
                ..
            } => &map[*start..*start + *capacity],
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Room::Heap(bytes) => bytes,
            #[cfg(target_os = "linux")]
            Room::Mapped {
                map,
                start,
                capacity,
                ..
            } => &mut map[*start..*start + *capacity],
        }
    }
}

impl HeldBytes {
    /// Room for `capacity` bytes (at least) of the given kind, none held yet.
    pub fn with_room(capacity: usize, pages: Pages) -> HeldBytes {
        HeldBytes {
            room: Room::new(capacity, pages),
            len: 0,
        }
    }

    /// A copy of `bytes` in ordinary memory.
    pub fn copy_of(bytes: &[u8]) -> HeldBytes {
        let mut held = HeldBytes::with_room(bytes.len(), Pages::Ordinary);
        held.extend_from_slice(bytes);
        held
    }

    /// How many bytes the room holds without being moved.
    pub fn capacity(&self) -> usize {
        self.room.bytes().len()
    }

    /// The kind of memory the bytes are held in.
    pub fn pages(&self) -> Pages {
        self.room.pages()
    }

    /// Reads from `input` until `most` bytes more are held or the input ends; the number
    /// read (0: the input had ended).
    pub fn read_from(&mut self, input: &mut impl Read, most: usize) -> io::Result<usize> {
        if let Room::Heap(bytes) = &mut self.room {
            // Ordinary memory grows as a vector does (the allocator moves a large one
            // without copying it), read into straight: nothing is zeroed first.
            bytes.truncate(self.len);
            let read = (&mut *input).take(most as u64).read_to_end(bytes)?;
            self.len += read;
            return Ok(read);
        }
        let target = self.len.saturating_add(most);
        let before = self.len;
        while self.len < target {
            if self.len == self.capacity() {
                self.grow(self.len + 1);
            }
            let end = target.min(self.capacity());
            match input.read(&mut self.room.bytes_mut()[self.len..end]) {
                Ok(0) => break,
                Ok(n) => self.len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.len - before)
    }

    /// The zeroed room after the held bytes, to be filled in place and then held with
    /// [`HeldBytes::hold`].
    pub fn spare_room_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.room.bytes_mut()[len..]
    }

    /// Holds the first `filled` bytes of the spare room as well.
    pub fn hold(&mut self, filled: usize) {
        assert!(
            filled <= self.capacity() - self.len,
            "more bytes than the room holds"
        );
        self.len += filled;
    }

    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        let (len, new_len) = (self.len, self.len + bytes.len());
        if new_len > self.capacity() {
            self.grow(new_len);
        }
        self.room.bytes_mut()[len..new_len].copy_from_slice(bytes);
        self.len = new_len;
    }

    /// Holds `new_len` bytes: new ones are zero. What a block grows by after it was read (its
    /// edits) is small: past the last huge page begun it is held in ordinary pages, not in
    /// a whole huge page more.
    pub fn resize(&mut self, new_len: usize) {
        if new_len > self.capacity() {
            self.grow(new_len);
        }
        #[cfg(target_os = "linux")]
        if let Room::Mapped {
            map,
            start,
            capacity,
            ..
        } = &self.room
        {
            let begun = self.len.next_multiple_of(HUGE_PAGE);
            if new_len > begun && begun < *capacity {
                // Advice only: where it is refused the growth takes huge pages as before.
                let _ =
                    map.advise_range(memmap2::Advice::NoHugePage, start + begun, capacity - begun);
            }
        }
        if new_len > self.len {
            let len = self.len;
            // Room that was held before may not be zero any more.
            self.room.bytes_mut()[len..new_len].fill(0);
        }
        self.len = new_len;
    }

    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Moves the bytes from `at` on into a room of their own of the given kind, with room
    /// for `capacity` bytes at least.
    pub fn split_off(&mut self, at: usize, capacity: usize, pages: Pages) -> HeldBytes {
        let mut rest = HeldBytes::with_room(capacity.max(self.len - at), pages);
        rest.extend_from_slice(&self[at..]);
        self.truncate(at);
        rest
    }

    /// Gives back the heap room not held (memory that was touched would otherwise stay
    /// resident); a mapped room has no pages past what was written.
    pub fn shrink_to_fit(&mut self) {
        if let Room::Heap(bytes) = &mut self.room {
            bytes.truncate(self.len);
            bytes.shrink_to_fit();
        }
    }

    /// A room of the same kind for `needed` bytes at least (twice the old one), the held
    /// bytes copied into it: only for a block with a document larger than its room. Heap
    /// room grows in place as a vector does.
    fn grow(&mut self, needed: usize) {
        if let Room::Heap(bytes) = &mut self.room {
            bytes.truncate(self.len);
            bytes.resize(needed, 0);
            return;
        }
        let capacity = needed.max(self.capacity() * 2);
        let mut room = Room::new(capacity, self.room.pages());
        room.bytes_mut()[..self.len].copy_from_slice(&self[..]);
        self.room = room;
    }
}

impl Deref for HeldBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.room.bytes()[..self.len]
    }
}

impl DerefMut for HeldBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.room.bytes_mut()[..len]
    }
}

impl std::fmt::Debug for HeldBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldBytes")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("pages", &self.pages())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds() -> [Pages; 3] {
        [
            Pages::Ordinary,
            Pages::Huge { ordinary: 0 },
            Pages::Huge {
                ordinary: HUGE_PAGE,
            },
        ]
    }

    /// A reader that hands out a few bytes at a time, as a pipe does.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(4093);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn the_mode_in_brackets_decides() {
        assert!(thp_mode_offers_huge_pages("always [madvise] never\n"));
        assert!(thp_mode_offers_huge_pages("[always] madvise never\n"));
        assert!(!thp_mode_offers_huge_pages("always madvise [never]\n"));
        assert!(!thp_mode_offers_huge_pages(""));
    }

    #[test]
    fn reading_past_the_room_grows_it_and_keeps_every_byte() {
        let input: Vec<u8> = (0..3 * HUGE_PAGE + 777).map(|i| (i % 251) as u8).collect();
        for pages in kinds() {
            let mut held = HeldBytes::with_room(1000, pages);
            let mut reader = Trickle(&input);
            let mut reads = 0;
            while held.read_from(&mut reader, 1 << 20).expect("memory reads") > 0 {
                reads += 1;
                assert!(held.len() <= reads << 20, "{pages:?}: read past `most`");
            }
            assert_eq!(&held[..], &input[..], "{pages:?}");
            assert!(held.capacity() >= input.len());
        }
    }

    #[test]
    fn resizing_zeroes_what_comes_back_and_splitting_moves_the_rest() {
        for pages in kinds() {
            let mut held = HeldBytes::with_room(16, pages);
            held.extend_from_slice(b"0123456789");
            held.truncate(4);
            held.resize(6);
            assert_eq!(&held[..], b"0123\0\0", "{pages:?}");
            held[4..].copy_from_slice(b"ab");
            let rest = held.split_off(2, 8, pages);
            assert_eq!((&held[..], &rest[..]), (&b"01"[..], &b"23ab"[..]));
            assert!(rest.capacity() >= 8);
            held.shrink_to_fit();
            assert_eq!(&held[..], b"01");
        }
    }

    #[test]
    fn the_spare_room_is_zeroed_and_held_once_filled() {
        for pages in kinds() {
            let mut held = HeldBytes::with_room(HUGE_PAGE, pages);
            held.extend_from_slice(b"ab");
            let room = held.spare_room_mut();
            assert!(room.len() >= HUGE_PAGE - 2 && room.iter().all(|&b| b == 0));
            room[..3].copy_from_slice(b"cde");
            held.hold(3);
            assert_eq!(&held[..], b"abcde", "{pages:?}");
        }
    }

    /// Where the kernel offers huge pages, a mapped room filled past its ordinary start is
    /// backed by them (the mapping's AnonHugePages in /proc/self/smaps); elsewhere there is
    /// nothing to see.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_mapped_room_gets_huge_pages_where_they_are_offered() {
        /// The AnonHugePages of the mapping that holds `address`, in KiB.
        fn anon_huge_kib(address: usize) -> Option<usize> {
            let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
            let mut inside = false;
            for line in smaps.lines() {
                let first = line.split_whitespace().next().unwrap_or_default();
                if let Some((start, end)) = first.split_once('-')
                    && let (Ok(start), Ok(end)) = (
                        usize::from_str_radix(start, 16),
                        usize::from_str_radix(end, 16),
                    )
                {
                    inside = (start..end).contains(&address);
                } else if inside && let Some(kib) = line.strip_prefix("AnonHugePages:") {
                    return kib.split_whitespace().next()?.parse().ok();
                }
            }
            None
        }
        if !huge_pages_offered() {
            eprintln!("transparent huge pages are not offered here: nothing to check");
            return;
        }
        let mut held = HeldBytes::with_room(
            8 * HUGE_PAGE,
            Pages::Huge {
                ordinary: HUGE_PAGE,
            },
        );
        assert!(matches!(held.pages(), Pages::Huge { .. }), "{held:?}");
        let input = vec![b'x'; 8 * HUGE_PAGE];
        held.read_from(&mut &input[..], input.len())
            .expect("memory reads");
        let last = held.as_ptr() as usize + held.len() - 1;
        let Some(kib) = anon_huge_kib(last) else {
            eprintln!("no /proc/self/smaps: nothing to check");
            return;
        };
        // Seven huge pages were written past the ordinary one; the kernel may lack a free
        // huge page for some of them when memory is fragmented, not for all.
        assert!(
            kib >= HUGE_PAGE / 1024,
            "AnonHugePages {kib} kB in the mapping after filling 16 MiB"
        );
    }
}
