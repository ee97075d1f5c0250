"""Every tunable of fadeway, named once. Settings override these per engine."""

from __future__ import annotations

from typing import Literal

#: The context window the ceiling assumes, in tokens, for every model (MECHANISM: "The ceiling").
DEFAULT_CEILING = 200_000

#: A user message after this much silence makes the turn sleep first (MECHANISM: "Sleep").
SLEEP_GAP_SECONDS = 24 * 60 * 60

# -- token estimation -----------------------------------------------------------------------

#: Tokens a provider adds around every message (role, separators), per OpenAI's published recipe.
TOKENS_PER_MESSAGE = 3
#: Extra token when a message carries a `name`.
TOKENS_PER_NAME = 1
#: Tokens that prime the reply (`<|start|>assistant<|message|>`).
TOKENS_REPLY_PRIMING = 3
#: Overhead of each tool definition beyond its JSON text.
TOKENS_PER_TOOL = 8
#: Fixed estimates for media whose size the text does not show.
TOKENS_PER_IMAGE = 765
TOKENS_PER_AUDIO = 200
TOKENS_PER_FILE = 1_000

#: Longest memory id accepted, in characters (an id never becomes a path or SQL itself).
MAX_MEMORY_ID_LENGTH = 1024

#: The Unix seconds a time may be, from the engine's clock or a replayed message, and so in an
#: export: those a datetime can show (years 1 to 9999), since blocks print their dates. Any two
#: such times lie well within the 2^53 s of each other that the activation kernel takes. Not
#: narrower (say, from 2000 on): a replay of stored conversations runs on their own timestamps,
#: which may be old, or the small numbers of a synthetic clock.
TIME_RANGE = (-62_135_596_800.0, 253_402_300_799.0)
#: The largest count (tokens, attempts) an export may hold: exact as a float, and a sum of
#: many of them still fits the 64-bit integers of the store and the Rust core.
MAX_COUNT = 2**53

#: Deepest nesting of objects and arrays accepted in a message, a reply, or a request field
#: fadeway reads (tools, tool_choice, instructions), counting the value itself as one level.
#: Checked before any recursive code reads the value: Python's recursion stops near 1,000
#: levels, and a message or a tool schema a provider takes is a few levels deep, a generous
#: JSON schema some tens; 100 refuses nothing real and leaves room under the recursion limit.
MAX_JSON_DEPTH = 100

# -- limits (settings of `fadeway.open`; checked before anything is written) -------------------

#: Largest message or item a request or reply may hold, in bytes of its JSON (`max_message_bytes`).
#: 1 MiB is about 250,000 tokens, more than the default ceiling: a message that size could never
#: be sent in a request anyway, while a large tool output (a file, a page, a long log of some
#: hundred kilobytes) passes.
MAX_MESSAGE_BYTES = 2**20
#: Most messages or items one request (its whole messages or input list) or one reply may hold
#: (`max_request_messages`). A caller that resends its whole history sends it all on every call,
#: and a history of 10,000 messages resent whole is a benchmarked use (benches/bench_decorate.py,
#: under 50 ms a call): 10,000 would refuse it. Five times that leaves room for a long agent run;
#: past it, aligning one call takes a quarter of a second and more.
MAX_REQUEST_MESSAGES = 50_000
#: Most entries one note may hold (`max_note_facts`): a note answers one ask for a few episodes
#: of 400 to 4,000 tokens each, which hold tens of facts at most (the offline writer keeps 12
#: per note); a longer note is not taken and the ask stands.
MAX_NOTE_FACTS = 200
#: Largest note call arguments, in bytes (`max_note_bytes`): room for MAX_NOTE_FACTS entries of
#: a sentence each. A longer note is not taken, and its call is shown in the view as a short stub
#: (the stored reply keeps it whole), so it does not ride in every later request.
MAX_NOTE_BYTES = 64 * 2**10

#: Messages after a differing first one that, all equal to the stored ones, show a resent
#: history with its first message edited (a delta holds new messages, not stored ones): fewer
#: would refuse a delta that happens to repeat stored messages, more would store a short edited
#: resend as new messages.
ALIGN_EDIT_EVIDENCE = 2

#: A correction ratio (provider count / our estimate) outside this range is not kept.
PLAUSIBLE_RATIO = (0.5, 2.0)

# -- engine --------------------------------------------------------------------------------

#: How many memories' stored histories an engine mirrors in memory (least recently used leave).
HISTORY_CACHE_MEMORIES = 256
#: How many bytes of message bodies those mirrors may hold together: past it the least recently
#: used leave too, all but the one just asked for (whatever its size).
HISTORY_CACHE_BYTES = 512 * 2**20

# -- store ----------------------------------------------------------------------------------

#: How long a writer waits for another to finish before giving up, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: A writer queued behind another's write transaction tries again after this many seconds,
#: doubling up to SQLITE_WRITER_POLL_MAX (SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100
#: ms between tries, several times the millisecond most write transactions take).
SQLITE_WRITER_POLL_FIRST = 0.00005
SQLITE_WRITER_POLL_MAX = 0.001
#: How much of the SQLite file each connection reads through a memory map rather than read()
#: calls. Recall looks up a few passages scattered over a large file on every turn; through
#: read() each page is a system call (8 passages of a 100k-passage store: 0.26 ms p95 with the
#: pages in the OS cache, 0.04 ms mapped). Address space only: the OS shares the pages.
SQLITE_MMAP_BYTES = 1 << 30
#: Connections a PostgreSQL store keeps to its server at most (each call holds one for its
#: transaction; the lane's threads and the callers' share them).
POSTGRES_POOL_SIZE = 16
#: How long a call waits for a free connection, and for the server to answer a connection,
#: before failing (seconds).
POSTGRES_WAIT_SECONDS = 30.0
POSTGRES_CONNECT_TIMEOUT_SECONDS = 10
#: A pooled connection back from a call less than this long ago is lent again without a check
#: (an empty query, a round trip: about a tenth of a replay's statements); one idle longer is
#: checked, and replaced if the server dropped it. HikariCP skips its check within 0.5 s alike.
POSTGRES_CHECK_IDLE_SECONDS = 1.0

# -- episodes -------------------------------------------------------------------------------

#: Episode sizes in tokens, and how much uncut closed history triggers a cut after a reply.
EPISODE_MIN_TOKENS = 400
EPISODE_MAX_TOKENS = 4_000
CUT_AFTER_TOKENS = 8_000
#: Units on each side of a stretch that a judge reads as context.
JUDGE_CONTEXT_UNITS = 3
#: Characters of a unit a cut hands any judge (long tool outputs are cut short for judging
#: only): the offline judge's cohesion reads all of them; the LLM judge's prompt quotes the
#: head and tail of them, LLM_JUDGE_UNIT_CHARS in all, to keep its prompts short.
JUDGE_UNIT_CHARS = 4_000

#: How often an inline cut is planned again when the history changed under it.
CUT_RETRIES = 3

#: How long closing a store waits for the transactions other threads are in (seconds).
STORE_CLOSE_WAIT_SECONDS = 30.0

# -- the lane -------------------------------------------------------------------------------

#: A worker holds a memory's lane this long (real seconds) before another may take it over.
LANE_LEASE_SECONDS = 30.0
#: Attempts at a failing job before it is parked (marked failed, kept) and the lane moves on: a
#: job that fails for a reason waiting will not mend (a bug, a refused key, an unreadable answer)
#: is tried this many times back to back.
JOB_MAX_ATTEMPTS = 3
#: Attempts at a job whose judge or embedder could not be reached (network errors, timeouts,
#: 408, 429 and 5xx): each waits longer than the last, from the engine's `lane_retry_seconds`
#: doubling up to LANE_RETRY_MAX_SECONDS, so the default (2 s) rides out about 45 minutes.
JOB_MAX_TRANSIENT_ATTEMPTS = 16
#: The first wait before a job that could not reach its service runs again (seconds).
LANE_RETRY_SECONDS = 2.0
#: The longest wait between two attempts at such a job (seconds).
LANE_RETRY_MAX_SECONDS = 300.0
#: Each such wait is shortened by up to this share of itself, at random.
LANE_RETRY_JITTER = 0.25
#: How long a job parked out of attempts waits before a lane run of its memory tries it again
#: (seconds); the wait doubles each time the job is parked again, up to LANE_PARKED_MAX_SECONDS.
LANE_PARKED_SECONDS = 600.0
#: The longest wait of a parked job (seconds): one that keeps failing costs a round a day.
LANE_PARKED_MAX_SECONDS = 86_400.0
#: Threads of the in-process background worker (different memories run concurrently).
LANE_THREADS = 2
#: How long a judgment in the lane may take (seconds).
LANE_JUDGE_DEADLINE = 120.0
#: How often a waiting drain looks again at lanes another worker holds (seconds).
LANE_POLL_SECONDS = 0.05
#: How often an idle background worker looks for jobs queued by other processes (seconds). On
#: PostgreSQL a notification wakes it at once (LANE_JOBS_CHANNEL); the poll is the safety net.
LANE_IDLE_POLL_SECONDS = 5.0
#: The PostgreSQL channel every transaction that queues jobs notifies (with no payload: a
#: memory's id is not for other memories' workers to learn) and workers listen on.
LANE_JOBS_CHANNEL = "fadeway_jobs"
#: How long a listener waits for a notification before it looks whether it should stop
#: (seconds): closing a worker waits at most about this long for it.
LANE_LISTEN_WAIT_SECONDS = 0.5
#: The first wait before a listener whose connection failed connects again (seconds); it doubles
#: while connecting keeps failing, up to LANE_LISTEN_RETRY_MAX_SECONDS.
LANE_LISTEN_RETRY_SECONDS = 1.0
#: The longest wait between a listener's attempts to connect again (seconds).
LANE_LISTEN_RETRY_MAX_SECONDS = 30.0

# -- segmentation / embedding ---------------------------------------------------------------
# Offline boundary scores (`fadeway.judge.cohesion`). Tuned on TIAGE train + dev only, by ranking
# quality (Pk of the top-k slots at the gold count, since sizes decide how many cuts and the
# scores only where); `benches/segmentation_tiage.py --tune` repeats the search.

#: Units compared on each side of a gap.
COHESION_WINDOW = 4
#: Size of the hashing embeddings the embedding view uses.
COHESION_EMBED_DIM = 256
#: Share of the lexical (tf-idf) view in the cohesion; the rest is the embedding view.
COHESION_LEXICAL_WEIGHT = 0.75
#: Width of the moving average over the cohesion curve (1 = none).
COHESION_SMOOTHING = 3
#: Where a yes/no boundary is needed without sizes: a gap whose score (first[j+1] + last[j])
#: exceeds the mean of its conversation's gap scores by this many standard deviations.
BOUNDARY_THRESHOLD_STD = 1.75

# -- forgetting -----------------------------------------------------------------------------

#: Complete turns a typical turn (and the next call's room) is measured from.
TYPICAL_TURN_WINDOW = 10
#: A typical turn, and room for the next call, before a memory has turns of its own.
DEFAULT_TYPICAL_TURN_TOKENS = 2_000
DEFAULT_NEXT_CALL_TOKENS = 4_000
#: The offline judge says a fact is about an episode at this cosine of their hashing
#: embeddings (best unit) or above. Chosen for F0.5 on the LoCoMo tuning split
#: (benches/about_locomo.py; precision .92, recall .50; acceptance .94 and .52): a wrong yes is a
#: trace that keeps an unrelated episode active after every note, and in a long memory the fade
#: then took the live conversation while the facts block grew (0.4, chosen for F1: facts blocks
#: of 7,059 tokens against 2,632 on the padded bench, RESULTS-about.md).
ABOUT_THRESHOLD = 0.45
ABOUT_EMBED_DIM = 1024
#: How long a cut that forgetting needs may wait for the judge, inline in decorate (seconds).
INLINE_CUT_DEADLINE = 10.0
#: Episodes the fade orders first; when the landing lies further, four times as many, and so on
#: (a fade rarely takes more, and ordering a prefix costs a fraction of a whole order).
FADE_FIRST = 256
#: How many times a fade may pick again with the note ask its picks make (the ask names their
#: turns, and scattered episodes make a longer one).
FADE_ASK_PASSES = 3

# -- the knowledge graph --------------------------------------------------------------------

#: A name not yet known is compared with every entity's canonical name by embedding; those at
#: this cosine or above (at most ENTITY_CANDIDATES of them) go to the judge to confirm.
ENTITY_CANDIDATE_THRESHOLD = 0.6
ENTITY_CANDIDATES = 3
#: Held facts a new fact is compared with: of those sharing an entity with it and its best
#: RELATE_BM25_HITS among all held facts, the RELATE_CANDIDATES most like it by BM25.
RELATE_CANDIDATES = 8
RELATE_BM25_HITS = 5
#: The offline judge (`fadeway.judge.offline`, "Relating two facts"), for two facts about one
#: subject. A fact between the same two entities at RELATE_SAME_THRESHOLD hashing cosine or
#: above, with the same values, negations and identifiers, restates the held fact. A newer fact
#: contradicts a held one when it denies a word the held one affirms (or the reverse) and they
#: share RELATE_NEGATION_OVERLAP of their words; when it gives another value of one kind (a
#: date, an amount, a count of one noun) and the two, values masked, are at
#: RELATE_VALUE_THRESHOLD cosine or above (RELATE_UPDATE_THRESHOLD when it says the value
#: changed: "now", "moved"); or when it takes back a value the held one gives ("not $24").
#: Chosen on the labelled tuning sets (benches/RESULTS-offline-judgments.md) for no wrong
#: retirement: lower overlaps and thresholds retired restatements and other events.
RELATE_SAME_THRESHOLD = 0.8
RELATE_NEGATION_OVERLAP = 0.75
RELATE_VALUE_THRESHOLD = 0.65
RELATE_UPDATE_THRESHOLD = 0.4
RELATE_EMBED_DIM = 1024

# -- passages and search -------------------------------------------------------------------

#: A message longer than this many characters (about 400 tokens) is cut into windows that
#: overlap by PASSAGE_OVERLAP_CHARS, so a fact near a cut is whole in one of them.
PASSAGE_MAX_CHARS = 1_600
PASSAGE_OVERLAP_CHARS = 200
#: Texts per embedder call in the lane's embed job.
EMBED_BATCH = 256
#: Memories whose search indexes an engine keeps open.
OPEN_INDEXES = 64
#: How many bytes of vectors those indexes may hold together: past it the least recently used
#: close too (saved, when the engine has a data directory), all but the one just asked for.
OPEN_INDEX_BYTES = 1024 * 2**20
#: A memory's changed indexes are saved at most this often (seconds), when it is evicted from
#: the open ones, and when the engine closes; after a crash they catch up from the store.
INDEX_SAVE_SECONDS = 60.0

# -- recall ---------------------------------------------------------------------------------

#: The recent conversation searched with the message: its last messages, up to this many
#: characters in all.
RECALL_RECENT_MESSAGES = 6
RECALL_RECENT_CHARS = 2_000
#: Hits each search of the graph returns, and facts shown per part. Passages are searched as
#: deep as the block may quote (RECALL_EXCERPTS). Chosen on the LoCoMo tuning split
#: (benches/recall_locomo.py, offline judge and note writer, ceiling 8,000): excerpts carry most
#: of the evidence per token, and the block is fitted to its token limit, so more excerpts cost
#: a small ceiling nothing. Once headers lost the time of day, 40 excerpts took the block from
#: .620 to .644 (20 had reached the block every time; more than 40 seldom fit).
RECALL_SEARCH_HITS = 20
RECALL_PART_FACTS = 3
RECALL_EXCERPTS = 40  # for each 1,000 tokens of `block_limit`
#: Every fact the walk kept is shown while the block fits. A block that must shrink gives up
#: its lowest ranked grouped facts before its excerpts while the grouped facts take more than
#: this share of `block_limit`, but never one the walk judged relevant or central. The share
#: is of the block with its frame (about 60 tokens of a 1,000-token block). On the LoCoMo
#: tuning split, once passages were searched without English stopwords (BM25_STOPWORDS),
#: excerpts earned more than the facts past 0.15: .668 at 0.1, .671 at 0.15, .669 at 0.2, .665
#: at 0.25 (before, 0.25 had been best: .641 against .635 at 0.1).
RECALL_FACTS_SHARE = 0.15
#: An excerpt of a message longer than EXCERPT_MAX_WORDS words shows the EXCERPT_WINDOW_WORDS of
#: it that hold the most of the query's words (`recall.block.window`); the header keeps the turn
#: and the date. On the LoCoMo tuning split, 25 and 20 first took the block from .600 to .609 at
#: the same size (15 and 18 no further); with 40 excerpts, .644 against .640 for 30 and 25.
EXCERPT_MAX_WORDS = 25
EXCERPT_WINDOW_WORDS = 20
#: A passage said by someone the message names ranks as if its place among the passages found
#: were divided by 1 + RECALL_SPEAKER_LIFT (`recall.pipeline._lifted`): on the LoCoMo tuning
#: split 3 gave .644, none .619. (Fused in by reciprocal rank instead, every named
#: passage went ahead of every other, the best word match included.)
RECALL_SPEAKER_LIFT = 3.0
#: A passage said on a day the message names (`recall.dates`) ranks as if its place were
#: divided by 1 + RECALL_DATE_LIFT (that very day: on the LoCoMo tuning split .676, against .673
#: when the days around it were lifted too).
RECALL_DATE_LIFT = 3.0
#: The passages said on such days, then those up to RECALL_DATE_BEFORE_DAYS before them or
#: RECALL_DATE_AFTER_DAYS after (what was done one day is often told a few days on), are
#: ranked by the message's words as a search of their own, when a day names at most
#: RECALL_DATE_PASSAGES of them (a year or a busy month picks out too little; an agent's day of
#: tool outputs in the bundled sample is 100 to 170 passages; 400 and 1,500 read the same on
#: the LoCoMo tuning split).
RECALL_DATE_BEFORE_DAYS = 1
RECALL_DATE_AFTER_DAYS = 3
RECALL_DATE_PASSAGES = 1_000
#: A grouped fact is left out while an excerpt shown carries this share of its words or more
#: (a fact quoting its own turn says nothing the excerpt does not: with facts that quote their
#: turns, .592 to .605 as above).
FACT_SAID_SHARE = 0.8
#: Texts whose terms recall keeps across recalls (an excerpt's or a fact's, for
#: FACT_SAID_SHARE): a block quotes up to RECALL_EXCERPTS passages, and the next messages of
#: one topic recall many of them again. A few kB for a passage of 400 characters: a few MB.
RECALL_TEXT_CACHE = 1024
#: Units of recall blocks (a line with its line break; an excerpt's lines together) whose sizes
#: in tokens are kept across recalls (`recall.block.unit_sizes`): a block of 2,000 tokens is
#: about a hundred, and fitting counts its states from them. A few MB at most.
RECALL_UNIT_CACHE = 8192
#: Facts shown under an excerpt: its episode's facts that the walk kept (recall) or distill kept,
#: best first, none shown elsewhere in the block.
RECALL_EXCERPT_FACTS = 1
#: The most tokens a recall block may take (`recall.block.block_limit`): RECALL_BLOCK_SCALE of the
#: ceiling, at least RECALL_BLOCK_LEAST and at most RECALL_BLOCK_TOKENS, and never more than
#: RECALL_BLOCK_SHARE of a small ceiling, so that the turn in progress (which is never
#: forgotten) and its block still fit under it. Past it, the least of what the block shows is
#: left out first (`recall.block`). A block is read again with every request its turn is in
#: view: its tokens are paid many times.
RECALL_BLOCK_TOKENS = 2_000
RECALL_BLOCK_LEAST = 1_000
RECALL_BLOCK_SCALE = 0.125
RECALL_BLOCK_SHARE = 0.25
#: A hit by meaning below its embedder's floor (`Embedder.min_similarity`) is no hit: a vector
#: search always returns its k nearest, and each model has its own scale of cosines. The hashing
#: embedder's, 0.35 on the LoCoMo tuning split: its hits below it only displaced better BM25
#: hits (passage recall@4 .38 fused at 0.15, .43 at 0.35, the same as BM25 alone). A dense
#: model's (sentence-transformers, an endpoint's): DENSE_MIN_SIMILARITY, tuned with MiniLM.
RECALL_MIN_SIMILARITY = 0.35
DENSE_MIN_SIMILARITY = 0.2
#: The walk: facts at KEEP_LEVEL or above are shown, at LEAD_LEVEL or above they lead on to the
#: facts on the far side of their entities, at most WALK_DEPTH steps and WALK_FANOUT new facts
#: a step. An entity that more than WALK_HUB_SHARE of the held facts touch, and more than a step
#: takes, is a hub and leads nowhere: its far side is a topic, not a bridge (in a conversation of
#: two, each speaker touches about half the facts). On LoCoMo conv-30 at 6,000 tokens the walk's
#: reads fell by half (440 -> 225 tokens a user turn, a selective model), the tuning split's
#: block unchanged (.659; multi-hop .422 -> .423).
KEEP_LEVEL = 1
LEAD_LEVEL = 2
WALK_DEPTH = 2
WALK_FANOUT = 16
WALK_HUB_SHARE = 0.1
#: Threads that run recall's searches, the recalling thread among them (they release the GIL).
RECALL_SEARCH_THREADS = 2
#: How long decorate waits for an inline walk when none was prepared, and for the whole recall
#: (embedding the queries included), in seconds.
RECALL_WALK_DEADLINE = 2.0
RECALL_DEADLINE = 5.0
#: How long the recalls of a request's user messages before its last one may take together, in
#: seconds (the last one, which the reply answers, has its own `RECALL_DEADLINE`).
RECALL_EARLIER_DEADLINE = 2.0
#: The offline judge's levels: hashing cosine with the dialogue's last LEVEL_DIALOGUE_CHARS at
#: or above each threshold raises a fact one level.
LEVEL_THRESHOLDS = (0.1, 0.2, 0.35)
LEVEL_DIALOGUE_CHARS = 1_500
#: The dialogue before the newest message counts at this weight (`levels_offline`); a word in
#: more than LEVEL_COMMON_SHARE of LEVEL_COMMON_MIN or more facts judged together is not
#: distinctive. On the LoCoMo tuning split the block went from .606 to .609 of the evidence
#: (weight 1 and no distinctive word needed: facts about the talk before a question, or only
#: naming its person, filled the block; .558 to .583 when the note writer wrote more facts).
LEVEL_RECENT_WEIGHT = 0.5
LEVEL_COMMON_MIN = 4
LEVEL_COMMON_SHARE = 0.3
#: The offline distill: a fact is kept at this cosine with the turn or above, unless this share
#: of its words already appear in the turn. On the padded LoCoMo tuning set (16k), 0.15 left
#: the blocks of earlier turns 5,757 of a question's 10,430 tokens for .014 of its evidence, and
#: the request .011 behind a window plus BM25 of its size; at 0.25 they take 3,605 and the
#: request is .010 ahead (0.35: .013 ahead, but the 8k block alone .664 against .674).
DISTILL_RELEVANT = 0.25
DISTILL_SAID = 0.8
#: What distill reads of the turn (the message and the replies), from its end.
DISTILL_CONVERSATION_CHARS = 16_000

# -- the offline note writer ----------------------------------------------------------------

#: Facts the offline note writer keeps per note, and the sentence lengths it considers.
NOTE_WRITER_MAX_FACTS = 12
NOTE_WRITER_MIN_CHARS = 20
NOTE_WRITER_MAX_CHARS = 400

#: BM25's term-frequency saturation (k1) and length normalisation (b), the usual 1.2 and 0.75:
#: passed to every Rust index fadeway makes (a saved index built with others is rebuilt).
BM25_K1 = 1.2
BM25_B = 0.75
#: The stopwords recall's word indexes drop (`_core.Bm25Index`): "english", a common English
#: stop list (pronouns, auxiliaries, question words, the "s" of a possessive), not Lucene's 33
#: words. On the LoCoMo tuning split, evidence turns among a question's 25 best passages went
#: from .573 to .599 (`What is Gina's favorite style of dance?`: "what" and "s" ranked every
#: "what's your favorite ..." ahead of the turn about dance). A saved index built with other
#: stopwords is rebuilt.
BM25_STOPWORDS: Literal["lucene", "english", "none"] = "english"
#: A word in more than this share of a memory's passages is left out of the word searches of
#: them (`_core.Bm25Index(max_df=...)`; a share of at least 64 passages, so a young memory's
#: words all count). In a conversation of two, each one's name is in most turns, said or
#: addressed, and Lucene's idf still weighs it at about ln 2: a question naming both filled the
#: word search's list with short turns that name them, pushed down the hits by meaning it was
#: fused with, and the block quoted them. On the LoCoMo tuning split: .664 of the evidence in
#: blocks of 867 tokens, against .658 in 978 (`docs/design/recall.md`). Facts keep every word.
#: A saved index built with another share is rebuilt.
BM25_MAX_DF = 0.35

#: The rank constant of reciprocal rank fusion: an id at rank r of a list earns
#: weight / (RRF_K + r) (Cormack et al.'s usual 60).
RRF_K = 60

#: Size of the default (hashing) embeddings stored with passages and searched with hnswlib.
#: LoCoMo tuning split, evidence recall (strict) by size: 1,024 .744 (.542), 512 .743 (.539),
#: 384 .741 (.534), 256 .724 (.531). 512 recalls as 1,024 does at half the cost of every
#: vector distance, the bulk of recall's time on a large memory (benches/recall_latency.py).
EMBED_DIM = 512

# -- recall: parts of a message -------------------------------------------------------------

#: A message is searched part by part (MECHANISM: "Recall"). A part of fewer visible characters
#: is joined to a neighbour: 16 keeps acknowledgements ("Thanks!", "Sounds good.") from being
#: searched alone but lets a short tacked-on question ("Also, who owns checkout?", 24) stand as
#: its own part, which is the point of parts (at 40 most such questions would be glued onto the
#: sentence before them).
PART_MIN_CHARS = 16
#: A part longer than this is cut into windows overlapping by PART_OVERLAP_CHARS: 400 characters
#: is about 100 tokens, short enough that a part's embedding stays about one thing; the overlap
#: (a clause, about 20 tokens) keeps a phrase cut at a window's edge whole in one of them.
PART_MAX_CHARS = 400
PART_OVERLAP_CHARS = 80

# -- the HTTP client of model endpoints (`http.Endpoint`) --------------------------------------

#: Seconds one attempt may take (send, wait for and read the answer), and to connect.
HTTP_REQUEST_TIMEOUT = 60.0
HTTP_CONNECT_TIMEOUT = 10.0
#: Calls in flight at once per endpoint (also the size of its connection pool).
HTTP_MAX_CONCURRENCY = 8
#: Attempts per call, the first included.
HTTP_MAX_ATTEMPTS = 4
#: Backoff before retry n (n = 1, 2, ...): HTTP_BACKOFF_INITIAL * 2**(n-1) seconds, at most
#: HTTP_BACKOFF_MAX, shortened by up to HTTP_BACKOFF_JITTER of itself at random so that callers
#: do not retry in step. Longer waits ride out more of an outage but hold the lane longer.
HTTP_BACKOFF_INITIAL = 0.5
HTTP_BACKOFF_MAX = 8.0
HTTP_BACKOFF_JITTER = 0.25
#: The longest wait a server's Retry-After may ask for; longer asks wait this long.
HTTP_RETRY_AFTER_MAX = 60.0
#: Statuses that are retried, besides every 5xx.
HTTP_RETRY_STATUSES = frozenset({408, 429})
#: Characters of a server's error text kept in an error message.
HTTP_ERROR_TEXT_CHARS = 500
#: How long closing waits for the loop thread to finish (seconds).
HTTP_CLOSE_TIMEOUT = 5.0

# -- the proxy (`fadeway serve`) -----------------------------------------------------------------

#: The header a request names its memory by, unless the proxy reads the id from the body.
SERVE_MEMORY_HEADER = "X-Fadeway-Memory"
#: Seconds the proxy waits for the upstream: to connect, and between two reads of its answer
#: (a reasoning model may think for minutes before its first byte, and a stream may pause). The
#: proxy never retries: the caller's SDK retries 429 and 5xx, which pass through to it as sent.
SERVE_CONNECT_TIMEOUT = 10.0
SERVE_READ_TIMEOUT = 600.0
#: Connections the proxy keeps open to the upstream at once.
SERVE_MAX_CONNECTIONS = 100
#: Calls the proxy makes again for one request when the model's reply held only its note (the
#: library's `call_again`): one is what a taken note needs; a second covers a model that
#: answered a second ask the same way; past that the client gets the reply, notes taken out.
SERVE_NOTE_ROUNDS = 2

# -- vector indexes (hnswlib) ------------------------------------------------------------------

#: hnswlib graph parameters: links per node, and candidate list sizes while building and
#: searching (hnswlib's own defaults are M 16, ef_construction 200, ef 10; 10 loses recall at k 10).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 64
#: A fixed seed, with one insertion thread, makes the same adds build the same graph, so replays
#: search alike.
HNSW_SEED = 100
#: Indexes of at most this many vectors are searched exactly, over a copy of their vectors,
#: with ties ordered by id: the answer then does not depend on the graph hnswlib built. That
#: graph depends on hnswlib's random levels, whose generator restarts when an index is loaded,
#: so an index saved and reloaded mid-way grows another graph than one never saved, and an
#: approximate search may answer otherwise after a restart. Most conversations stay under this
#: size (LoCoMo's hold 400-900 passages); the copy costs 2 MiB at 512 dimensions, and the search
#: of 4 queries over 1,024 vectors about 0.2 ms, as hnswlib's at ef 64.
VECTOR_EXACT_MAX = 1_024
#: Room made at first, and the factor capacity grows by when an add needs more.
VECTOR_INITIAL_CAPACITY = 1_024
VECTOR_GROWTH = 2

# -- the LLM judge -----------------------------------------------------------------------------

#: Calls one judgment has in flight at once (the endpoint also bounds the whole process).
LLM_JUDGE_CONCURRENCY = 4
#: Units around each window of boundaries it cuts a long stretch into, read as context only
#: (beside the JUDGE_CONTEXT_UNITS a cut gives around the whole stretch).
LLM_JUDGE_CONTEXT_UNITS = 3
#: What the offline judge's cohesion scores count for, times, in a unit the model's boundaries
#: answer left out (it lists the units that open or close a concept only): below every unit it
#: listed, and among the rest in the offline judge's order, so that sizes alone never decide.
LLM_JUDGE_UNLISTED_BOUNDARY = 0.001
#: Characters of a unit, a fact (or excerpt), and of the dialogue a prompt quotes; longer texts
#: keep their head and tail (where a unit opens and closes its concept). Longer quotes judge the
#: middle of long texts too, at the price of input tokens per call. Episodes are never cut short.
LLM_JUDGE_UNIT_CHARS = 1_500
LLM_JUDGE_ITEM_CHARS = 1_000
LLM_JUDGE_DIALOGUE_CHARS = 6_000
#: Episode characters per `about` call, the room (facts are short; episodes are most of the
#: prompt): a longer episode is judged in pieces of at most this many, its answer their best.
LLM_JUDGE_ABOUT_EPISODE_CHARS = 24_000
#: Items per call (`llm.BatchSizes`' defaults): units judged as boundaries, fact x episode
#: pairs judged "about" (and facts per call: LLM_JUDGE_BATCH_FACTS), fact pairs related, name
#: pairs confirmed, facts levelled or distilled. Larger batches make fewer calls, and longer
#: answers a model is likelier to get wrong.
LLM_JUDGE_BATCH_UNITS = 40
LLM_JUDGE_BATCH_ABOUT_PAIRS = 150
LLM_JUDGE_BATCH_PAIRS = 40
LLM_JUDGE_BATCH_NAMES = 80
LLM_JUDGE_BATCH_FACTS = 40

# -- the LLM note writer -----------------------------------------------------------------------

#: Calls per ask: the first, and one retry when its answer is not a readable note call.
NOTE_WRITER_ATTEMPTS = 2

# -- what a note writer reads beside the leaving turns -----------------------------------------

#: Most tokens of the context a note writer gets beside the leaving turns (`notes.context`): the
#: caller's latest instructions, the canonical names the memory holds for the entities those
#: turns mention, and the facts held about them, most relevant first, each kept while it fits,
#: counted as the one message that carries them. The leaving turns themselves are never cut.
#: Every token is paid on every note a writer writes, and a note's leaving turns are 400 to
#: 4,000 tokens (an episode): a full context adds a quarter to two and a half times that read.
#: Fewer tokens keep fewer held facts (the names come first and are short).
NOTE_CONTEXT_TOKENS = 1_000
#: Most tokens the caller's instructions may take of that context (cut at a word, marked "…"),
#: so that a long system prompt never leaves no room for the names the ask says to use.
NOTE_CONTEXT_INSTRUCTIONS_TOKENS = 500

# -- batch replay ------------------------------------------------------------------------------

#: SQLite durability for replay. NORMAL in WAL mode loses nothing a killed process committed,
#: only the last commits on a power cut, and a replay resumes after whatever survived; FULL's
#: fsync per decorate and report made replay I/O-bound.
REPLAY_SYNCHRONOUS = "NORMAL"
#: A lane lease in replay: one worker owns each memory, so a short lease only bounds how long a
#: resumed run waits for the lane a killed worker held.
REPLAY_LANE_LEASE_SECONDS = 3.0

# -- the command line --------------------------------------------------------------------------

#: The demo's ceiling: small enough that the sample's history fades, seals and is recalled.
DEMO_CEILING = 32_000

#: `fadeway eval`'s ceiling: below a LoCoMo conversation's ~26k tokens, so the memory forgets
#: most of it (the recall benches' ceiling).
EVAL_CEILING = 8_000
#: The answerer's window `fadeway eval` assumes: the full context's limit.
EVAL_WINDOW = 128_000
