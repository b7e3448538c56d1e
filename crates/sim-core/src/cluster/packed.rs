//! [`Dictionary`]: object JSON kept compressed, for the kinds the sim holds by the hundred
//! thousand but rarely reads (core/v1 Events: four or five per pod).
//!
//! An Event is about 700 bytes of JSON, and most of it is the same in every Event: field names,
//! `apiVersion`, the kubelet's reasons and messages, the node. zstd with a dictionary made of a
//! few typical objects of the kind keeps only what differs (names, uids, times): about 150 bytes.
//! The dictionary is raw content (no training step): zstd matches each new object against it.
//!
//! Packing happens once per write, under the table's lock; unpacking happens when an object is
//! served by GET, LIST or a watch's initial state, and when a write decodes it. Live watch events
//! never unpack: the table broadcasts the JSON it serialized before packing. Each thread keeps
//! one compression and one decompression context (a context is about 100 KiB to create).

use std::cell::RefCell;

use bytes::Bytes;
use zstd_safe::{CCtx, CDict, DCtx, DDict};

/// zstd level 3 (zstd's default): at these sizes higher levels save a few bytes for twice the
/// time, and every write of the kind pays it.
const LEVEL: i32 = 3;

/// A compression dictionary for one kind, digested once for compressing and for decompressing.
pub struct Dictionary {
    compress: CDict<'static>,
    decompress: DDict<'static>,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary").finish_non_exhaustive()
    }
}

thread_local! {
    static COMPRESSOR: RefCell<CCtx<'static>> = RefCell::new(CCtx::create());
    static DECOMPRESSOR: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
}

impl Dictionary {
    /// A dictionary whose content is `samples`: typical objects of the kind, serialized the way
    /// the store serializes them, one after another.
    pub fn new(samples: &[u8]) -> Self {
        Dictionary {
            compress: CDict::create(samples, LEVEL),
            decompress: DDict::create(samples),
        }
    }

    /// `json` compressed, or None if zstd failed (the caller keeps it uncompressed then).
    pub fn pack(&self, json: &[u8]) -> Option<Bytes> {
        let mut out = Vec::with_capacity(zstd_safe::compress_bound(json.len()));
        COMPRESSOR
            .with_borrow_mut(|cctx| cctx.compress_using_cdict(&mut out, json, &self.compress))
            .ok()?;
        out.shrink_to_fit();
        Some(Bytes::from(out))
    }

    /// The JSON `packed` was made from.
    pub fn unpack(&self, packed: &[u8]) -> Bytes {
        // Invariant: `packed` is a frame `pack` made with this dictionary, which records the
        // content size, so the capacity is exact and decompression cannot fail.
        let size = zstd_safe::get_frame_content_size(packed)
            .ok()
            .flatten()
            .expect("packed frames record their size");
        let mut out = Vec::with_capacity(usize::try_from(size).expect("objects fit in memory"));
        DECOMPRESSOR
            .with_borrow_mut(|dctx| dctx.decompress_using_ddict(&mut out, packed, &self.decompress))
            .expect("packed frames decompress with their dictionary");
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_and_a_dictionary_of_lookalikes_shrinks_an_object_several_times() {
        let sample = br#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"a.1","namespace":"default"},"reason":"Pulling","message":"Pulling image \"busybox:1.36\"","source":{"component":"kubelet","host":"sim-node-1"},"type":"Normal"}"#;
        let dictionary = Dictionary::new(sample);
        let object = br#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"b.2","namespace":"default"},"reason":"Pulling","message":"Pulling image \"busybox:1.36\"","source":{"component":"kubelet","host":"sim-node-1"},"type":"Normal"}"#;
        let packed = dictionary.pack(object).expect("packs");
        assert_eq!(&dictionary.unpack(&packed)[..], &object[..]);
        assert!(
            packed.len() * 4 < object.len(),
            "{} bytes packed from {}",
            packed.len(),
            object.len()
        );
        let empty = dictionary.pack(b"").expect("packs");
        assert!(dictionary.unpack(&empty).is_empty());
    }
}
