//! Bindings for the incremental BM25 index: a frozen pyclass around an `RwLock` of the core index.
//!
//! Every method takes the lock inside `py.detach`, so a thread waiting for the lock never holds
//! the GIL (holding it there could deadlock against a writer that needs the GIL back).

use std::collections::HashSet;
use std::sync::RwLock;

use fadeway_core::bm25::{
    best_window as core_best_window, tokenize as core_tokenize, Analyzer, Bm25Index as CoreIndex,
    Stopwords,
};
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyBytes;

use crate::arrays::{array_arg, contiguous};
use crate::errors::to_py;

/// Which stopwords to drop, as Python names them: `"lucene"` (or True), `"english"`, `"none"`
/// (or False).
#[derive(FromPyObject)]
enum StopwordsArg {
    Flag(bool),
    Name(String),
}

impl TryFrom<StopwordsArg> for Stopwords {
    type Error = PyErr;

    fn try_from(arg: StopwordsArg) -> PyResult<Self> {
        match arg {
            StopwordsArg::Flag(true) => Ok(Stopwords::Lucene),
            StopwordsArg::Flag(false) => Ok(Stopwords::None),
            StopwordsArg::Name(name) => match name.as_str() {
                "lucene" => Ok(Stopwords::Lucene),
                "english" => Ok(Stopwords::English),
                "none" => Ok(Stopwords::None),
                _ => Err(PyValueError::new_err(format!(
                    "stopwords must be \"lucene\", \"english\", \"none\" or a bool, not {name:?}"
                ))),
            },
        }
    }
}

fn stopwords_name(stopwords: Stopwords) -> &'static str {
    match stopwords {
        Stopwords::None => "none",
        Stopwords::Lucene => "lucene",
        Stopwords::English => "english",
    }
}

/// An Okapi BM25 index over documents with int64 ids, updated in place. `k1` and `b` are the BM25
/// parameters (fadeway passes its named constants); `stopwords` drops Lucene's small English
/// stop set (`"lucene"` or True), a common English stop list (`"english"`) or none (`"none"` or
/// False), and `stem` strips plurals (Harman's S-stemmer). Tokens are runs of alphanumeric
/// characters, lowercased. Safe to share between threads: searches run in parallel, a write
/// waits for them.
#[pyclass(frozen, module = "fadeway._core")]
pub struct Bm25Index {
    inner: RwLock<CoreIndex>,
}

/// A lock is poisoned only if a panic happened while it was held, which the core does not do on
/// any input; if it happens anyway the index may be half-updated, so it is not used again.
fn poisoned<T>(_: T) -> PyErr {
    PyRuntimeError::new_err("the BM25 index was left inconsistent by an earlier internal error")
}

/// Search results: ids and scores, best first.
type Hits<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f64>>);

#[pymethods]
impl Bm25Index {
    /// An empty index. A query word in more than a share `max_df` of the documents (of at least
    /// 64) is left out of the query. Raises ValueError for k1 not finite or negative, b outside
    /// [0, 1], stopwords not one of the names, or max_df outside (0, 1].
    #[new]
    #[pyo3(
        signature = (k1 = 1.2, b = 0.75, stopwords = StopwordsArg::Flag(true), stem = true, max_df = 1.0),
        text_signature = "(k1=1.2, b=0.75, stopwords=True, stem=True, max_df=1.0)"
    )]
    fn new(k1: f64, b: f64, stopwords: StopwordsArg, stem: bool, max_df: f64) -> PyResult<Self> {
        let analyzer = Analyzer { stopwords: stopwords.try_into()?, stem };
        let index = CoreIndex::new(k1, b, analyzer).and_then(|i| i.with_max_df(max_df));
        let index = index.map_err(to_py)?;
        Ok(Bm25Index { inner: RwLock::new(index) })
    }

    /// Adds `texts[j]` under `ids[j]` (int64 array) with the GIL released. Raises ValueError when
    /// the lengths differ or an id is already in the index or repeated; nothing is added then.
    fn add(&self, py: Python<'_>, ids: &Bound<'_, PyAny>, texts: Vec<PyBackedStr>) -> PyResult<()> {
        let ids = array_arg::<i64>(ids, "ids")?;
        let ids = contiguous(&ids, "ids")?;
        py.detach(|| self.inner.write().map_err(poisoned)?.add(ids, &texts).map_err(to_py))
    }

    /// Removes the documents with these ids (int64 array); ids not in the index are ignored.
    /// Returns how many documents were removed.
    fn remove(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ids = array_arg::<i64>(ids, "ids")?;
        let ids = contiguous(&ids, "ids")?;
        py.detach(|| Ok(self.inner.write().map_err(poisoned)?.remove(ids)))
    }

    /// The `k` best documents for `query` as `(ids int64, scores float64)`, best first, ties to
    /// the lower id; only documents matching a query token appear. Runs with the GIL released.
    fn search<'py>(&self, py: Python<'py>, query: PyBackedStr, k: usize) -> PyResult<Hits<'py>> {
        let hits =
            py.detach(|| Ok::<_, PyErr>(self.inner.read().map_err(poisoned)?.search(&query, k)))?;
        let (ids, scores): (Vec<i64>, Vec<f64>) = hits.into_iter().unzip();
        Ok((ids.into_pyarray(py), scores.into_pyarray(py)))
    }

    /// Each of `ids`' scores for `query`, in their order (0 for an unknown id or no match).
    fn scores<'py>(
        &self,
        py: Python<'py>,
        query: PyBackedStr,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let ids = array_arg::<i64>(ids, "ids")?;
        let ids = contiguous(&ids, "ids")?;
        let scores =
            py.detach(|| Ok::<_, PyErr>(self.inner.read().map_err(poisoned)?.scores(&query, ids)))?;
        Ok(scores.into_pyarray(py))
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.inner.read().map_err(poisoned)?.len())
    }

    fn __contains__(&self, id: i64) -> PyResult<bool> {
        Ok(self.inner.read().map_err(poisoned)?.contains(id))
    }

    /// The BM25 parameters and tokenizer flags, as `(k1, b, stopwords, stem, max_df)`, the
    /// stopwords by name.
    #[getter]
    fn params(&self) -> PyResult<(f64, f64, &'static str, bool, f64)> {
        let index = self.inner.read().map_err(poisoned)?;
        let a = index.analyzer();
        Ok((index.k1(), index.b(), stopwords_name(a.stopwords), a.stem, index.max_df()))
    }

    /// The index as bytes for `from_bytes` (a version byte and a checksum included).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes =
            py.detach(|| Ok::<_, PyErr>(self.inner.read().map_err(poisoned)?.to_bytes()))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// An index read back from `to_bytes`. Raises ValueError for corrupt or foreign bytes.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let index = py.detach(|| CoreIndex::from_bytes(data)).map_err(to_py)?;
        Ok(Bm25Index { inner: RwLock::new(index) })
    }
}

/// The tokens of `text` as a `Bm25Index` with these flags reads it (documents and queries alike).
#[pyfunction]
#[pyo3(
    signature = (text, stopwords = StopwordsArg::Flag(true), stem = true),
    text_signature = "(text, stopwords=True, stem=True)"
)]
fn tokenize(text: &str, stopwords: StopwordsArg, stem: bool) -> PyResult<Vec<String>> {
    Ok(core_tokenize(text, Analyzer { stopwords: stopwords.try_into()?, stem }))
}

/// The first word of the run of `size` consecutive words of `text` (split as `str.split()`
/// splits it) that holds the most words with a token in `wanted` (each word read as `tokenize`
/// with these flags reads it; the first such run), and the text's number of words.
#[pyfunction]
#[pyo3(
    signature = (text, wanted, size, stopwords = StopwordsArg::Flag(true), stem = true),
    text_signature = "(text, wanted, size, stopwords=True, stem=True)"
)]
fn best_window(
    text: &str,
    wanted: HashSet<String>,
    size: usize,
    stopwords: StopwordsArg,
    stem: bool,
) -> PyResult<(usize, usize)> {
    let analyzer = Analyzer { stopwords: stopwords.try_into()?, stem };
    Ok(core_best_window(text, &wanted, size, analyzer))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Bm25Index>()?;
    m.add_function(wrap_pyfunction!(tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(best_window, m)?)?;
    Ok(())
}
