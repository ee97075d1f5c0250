//! `Bm25Index.from_bytes(data)` with any bytes, as Python can pass them: an error, never a panic
//! or an allocation the input does not pay for. Half the inputs get the header and checksum
//! fixed up so that the fuzzer reaches the parser behind them; an index that is read back must
//! search without panicking and write bytes that read back to the same index.
#![no_main]

use fadeway_core::bm25::Bm25Index;
use libfuzzer_sys::fuzz_target;

/// FNV-1a 64, the format's checksum.
fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in data {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fuzz_target!(|data: &[u8]| {
    let _ = Bm25Index::from_bytes(data);
    let Some((&mode, body)) = data.split_first() else { return };
    if mode & 1 == 0 {
        return;
    }
    // Magic, version 1, then the fuzzer's body, then its checksum.
    let mut fixed = b"FWBM\x01".to_vec();
    fixed.extend_from_slice(body);
    let sum = fnv1a(&fixed);
    fixed.extend_from_slice(&sum.to_le_bytes());
    let Ok(index) = Bm25Index::from_bytes(&fixed) else { return };
    for q in ["a", "apple run", "x 42", ""] {
        for k in [0, 1, 10, usize::MAX] {
            let hits = index.search(q, k);
            assert!(hits.iter().all(|&(id, s)| index.contains(id) && !s.is_nan()));
        }
    }
    let bytes = index.to_bytes();
    let back = Bm25Index::from_bytes(&bytes).expect("to_bytes output refused");
    assert_eq!(back.len(), index.len());
    assert_eq!(back.to_bytes(), bytes, "a second round trip differs");
});
