"""The distractor candidates other annotations offer each one, hardest first, under each method's measure."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from benchsmith.geometry import Box, iou
from benchsmith.records import Image, normalise_text, stable_hash
from benchsmith.similarity import edit_similarity, jaccard, word_overlap, word_set
from generators.reform.answers import answer_key, is_number
from generators.reform.embeddings import Embeddings
from generators.reform.captions import CaptionReader, Mention, contradicts, fits
from generators.reform.parsing import Parsed, Reading, box_text, objects_of, read
from generators.reform.ranks import choose_by_rank, key_ranks
from generators.reform.settings import ReformSettings
from ingest.tasks import load_tasks

if TYPE_CHECKING:
    import numpy as np


@lru_cache(maxsize=4096)
def _folded(texts: tuple[str, ...]) -> frozenset[str]:
    return frozenset(t.casefold() for t in texts)


def _nearest_first(scores: np.ndarray, head: int):
    """Indices by descending score (ties by index): the first `head` found by partition, the rest only
    if the caller reads on."""
    import numpy as np
    if head >= len(scores):
        yield from sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return
    top = np.argpartition(-scores, head)[:head]
    yield from sorted(top.tolist(), key=lambda i: (-scores[i], i))
    rest = np.setdiff1d(np.arange(len(scores)), top)
    yield from sorted(rest.tolist(), key=lambda i: (-scores[i], i))


EMBED_AS_FOUND = 256      # new answers and class names sent to MiniLM together while the annotations are read
EMBEDDED_CACHE = 16_384  # keys whose MiniLM candidates, and option sets whose key ranks, are kept (a few MB)


def _cached(cache: dict, key, make: Callable[[], Any]):
    """`cache[key]`, made now when missing; a full cache (`EMBEDDED_CACHE`) is emptied first."""
    found = cache.get(key)
    if found is None:
        if len(cache) >= EMBEDDED_CACHE:
            cache.clear()
        found = cache[key] = make()
    return found


class Pools:
    """Everything other annotations offer as distractors, built once per run from the store's items."""

    def __init__(self, items: Iterable[Image], settings: ReformSettings, seed: int = 0,
                 asked: Mapping[tuple[str, str], Sequence[str]] | None = None) -> None:
        """`asked`: the caption questions already in the store, (item id, annotation id) -> options; a grown
        collection plans only the others, with what those use counted (`caption_uses`)."""
        import numpy as np
        self.settings, self.seed = settings, seed
        self.kinds = load_tasks(settings.tasks)
        self.embeddings = Embeddings(settings)
        self.embeddings.start()  # the model loads in its own process while the annotations are read
        answers: dict[tuple, Counter] = defaultdict(Counter)     # (kind, dataset, group) -> answer keys
        surfaces: dict[str, Counter] = defaultdict(Counter)      # answer key -> its surface forms
        classes: dict[tuple, set[str]] = defaultdict(set)        # (kind, dataset) -> class names
        labels: dict[str, set[str]] = defaultdict(set)           # dataset -> labels of its captioned images' objects
        attributes: set[str] = set()                             # of every object supplied with an image
        texts: set[str] = set()                                  # casefolded strings asked about
        self.text_surface: dict[str, str] = {}
        self.readings: dict[str, Reading] = {}   # item id -> its annotations, read in this one pass
        found: set[str] = set()   # answers and class names MiniLM will compare, sent as they turn up
        for item in items:
            reading = self.readings[item.id] = read(item, self.kinds, settings)
            for _label, values in objects_of(item):
                attributes.update(values)
            for parsed in reading.parsed.values():
                for p in parsed:
                    method = p.kind.method
                    if method in ("answers", "classes"):
                        found.update((p.key, *p.accepted))
                    if method == "answers":
                        for group in self.answer_groups(p):
                            answers[group][answer_key(p.key)] += 1
                        surfaces[answer_key(p.key)][p.key] += 1
                    elif method == "classes":
                        classes[(p.kind.key, p.dataset)].add(p.key)
                    elif method == "captions":
                        labels[p.dataset].update(label for label, _values in p.extra["objects"])
                    elif method == "texts":
                        texts.add(p.key.casefold())
                        self.text_surface.setdefault(p.key.casefold(), p.key)
            if len(found) >= EMBED_AS_FOUND:  # MiniLM works on them while the reading goes on
                self.embeddings.prefetch(found)
                found = set()
        surface = {key: c.most_common(1)[0][0] for key, c in surfaces.items()}
        self.pools: dict[tuple, list[str]] = {g: [surface[k] for k in sorted(c)] for g, c in answers.items()}
        self.pools |= {g: sorted(c) for g, c in classes.items()}
        self.texts = sorted(texts)
        # a dataset whose images come with objects: the labels they use are the ones its captions are read for
        self.caption_readers = {dataset: CaptionReader(frozenset(found - {""}), frozenset(attributes - {""}))
                                for dataset, found in labels.items() if found - {""}}
        self._mentions: dict[tuple[str, str], tuple[Mention, ...]] = {}   # (dataset, caption) -> `CaptionReader.mentions`
        self.captions: list[tuple[str, str]] = []                      # (caption, item id): the distractor pool
        for item_id, reading in self.readings.items():
            self.captions += self._keyed(reading, item_id)
        self.captions.sort()   # in no order the store happens to list the items in
        self._matrices: dict[tuple, tuple[np.ndarray, list[str], list[frozenset[str]], list[bool]]] = {}
        self._near: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}   # this window's keys only
        self._indexes: dict[str, tuple] = {}
        self._embedded: dict[tuple, list[tuple[str, float, str]]] = {}
        self._ranked: dict[tuple[str, tuple[str, ...]], bytes] = {}   # (method, options) -> key_ranks
        # the rest of what MiniLM compares is embedded while the word and character indexes are built
        self.embeddings.prefetch(found | {text for group in self.pools.values() for text in group})
        for method in ("captions", "texts"):
            self._index(method)
        # under `caption_uses`: each caption question's wrong options, chosen once for the whole collection
        self.caption_plan: dict[tuple[str, str], list[tuple[str, float, str]] | str] = {}
        self._caption_uses: Counter = Counter()   # normalised caption -> questions planned with it
        self._asked = dict(asked or {})
        self._caption_uses.update(normalise_text(o) for options in self._asked.values() for o in options)
        # `_next_usable`'s links over `captions`: an index no question may use any more points past itself
        self._spent: list[int] | None = None
        if settings.caption_uses is not None:
            self._plan_captions(self.readings)

    def read_also(self, items: Iterable[Image]) -> None:
        """Read items the pools' pass did not meet (ingested since): their annotations give questions,
        though not distractors to others. What MiniLM will compare of them is asked for now, as the
        pass does."""
        found: set[str] = set()
        new: list[str] = []
        for item in items:
            reading = self.readings[item.id] = read(item, self.kinds, self.settings)
            self._keyed(reading, item.id)
            new.append(item.id)
            found.update(t for parsed in reading.parsed.values() for p in parsed
                         if p.kind.method in ("answers", "classes") for t in (p.key, *p.accepted))
        self.embeddings.prefetch(found)
        if self.settings.caption_uses is not None:   # from the captions the collection's questions left unused
            self._plan_captions(new)

    def _plan_captions(self, item_ids: Iterable[str]) -> None:
        """The wrong options of every caption question of `item_ids`, so that no caption's text is in more
        than `caption_uses` questions, as key or wrong option (`caption_plan`; a question that cannot be
        made keeps the reason). A blind solver that met a caption as a key, or as a wrong option, in another
        question would otherwise know its role here. The plan is a function of the collection and the seed,
        never of the order items are listed or processed in: questions go by round (each photo's first key,
        then its second, ...), within a round in an order drawn from the seed, and each one takes three of
        the hardest candidates still free (`caption_candidates`), with the key's rank drawn uniformly, as
        `generate` does. Each photo's first key is held back from other questions until its own is made."""
        limit = self.settings.caption_uses
        asked = []   # (round, drawn order, item id, annotation, parsed)
        for item_id in item_ids:
            rounds: Counter = Counter()
            for parsed in self.readings[item_id].parsed.values():
                for p in parsed:
                    if p.kind.method == "captions" and (item_id, p.annotation) not in self._asked:
                        asked.append((rounds[p.accepted], stable_hash(self.seed, item_id, p.key), item_id,
                                      p.annotation, p))
                        rounds[p.accepted] += 1
        asked.sort(key=lambda a: a[:4])
        held = Counter(normalise_text(a[4].key) for a in asked if a[0] == 0)
        uses = self._caption_uses
        if self._spent is None:
            self._spent = list(range(len(self.captions) + 1))
        where: dict[str, list[int]] = defaultdict(list)   # normalised caption -> its indices in `captions`
        for i, (caption, _other) in enumerate(self.captions):
            where[normalise_text(caption)].append(i)
        for i in (i for text, found in where.items() if uses[text] >= limit for i in found):
            self._spent[i] = i + 1   # used up by questions asked before (`asked`)

        def free(text: str) -> bool:
            return uses[text] + held[text] < limit

        for start in range(0, len(asked), 1024):   # the nearest captions of some keys at a time
            window = asked[start:start + 1024]
            self._near = {}
            # keys already used up (most second and third keys of a photo) need no search
            self._nearest("captions", sorted({a[4].key for a in window if uses[normalise_text(a[4].key)] < limit}))
            for round_, _order, item_id, annotation, p in window:
                key = normalise_text(p.key)
                held[key] -= round_ == 0
                if uses[key] >= limit:
                    self.caption_plan[(item_id, annotation)] = (
                        f"its key caption is already in {limit} other question(s) (caption_uses)")
                    continue
                found = self.caption_candidates(p, item_id, free)
                if len(found) >= 3:
                    rng = random.Random(stable_hash(self.seed, item_id, annotation, p.key))
                    chosen, _rank = choose_by_rank(self.key_ranks(p, [p.key, *(t for t, _s, _h in found)]),
                                                   len(found), rng)
                    found = [found[i - 1] for i in chosen]
                if len(found) >= 3 or self.settings.llm_distractors:   # the question will be made
                    taken = [normalise_text(t) for t in (p.key, *(t for t, _s, _h in found))]
                    uses.update(taken)
                    for i in (i for text in taken if uses[text] >= limit for i in where.get(text, ())):
                        self._spent[i] = i + 1
                self.caption_plan[(item_id, annotation)] = found
        self._near = {}

    def _keyed(self, reading: Reading, item_id: str) -> list[tuple[str, str]]:
        """Turn each caption annotation of `reading` into up to `caption_keys` questions, each keyed by another
        of the image's captions; returns the captions other images may take as distractors. Where the image
        comes with objects, only captions that `fit` them are either (a caption its own photo's objects
        contradict is noisy truth); an annotation with no such caption is skipped with its reason."""
        pool = []
        for dimension, parsed in reading.parsed.items():
            kept = []
            for p in parsed:
                if p.kind.method != "captions":
                    kept.append(p)
                    continue
                reader = self.caption_readers.get(p.dataset) if p.extra["objects"] else None
                fitting = [c for c in p.accepted if reader is None or fits(self.mentions(p.dataset, c), p.extra["objects"])]
                keys = fitting[:self.settings.caption_keys]
                if not keys:
                    reading.skipped.setdefault(dimension, {})[p.annotation] = (
                        "no caption names an object the image has and nothing it lacks")
                kept += [replace(p, key=key, annotation=f"{p.annotation}#{i}" if len(keys) > 1 else p.annotation)
                         for i, key in enumerate(keys)]
                pool += [(c, item_id) for c in (p.accepted if reader is None else fitting)]
            reading.parsed[dimension] = kept
        return pool

    def mentions(self, dataset: str, caption: str) -> tuple[Mention, ...]:
        """The labels of `dataset`'s objects `caption` names (none where its images come without objects)."""
        reader = self.caption_readers.get(dataset)
        return () if reader is None else _cached(self._mentions, (dataset, caption), lambda: reader.mentions(caption))

    @staticmethod
    def answer_groups(p: Parsed) -> list[tuple]:
        """The pools a VQA answer joins: its question type's and, as a fallback, its answer type's."""
        groups = [(p.kind.key, p.dataset, p.group)]
        if p.extra["answer_type"]:
            groups.append((p.kind.key, p.dataset, "type:" + p.extra["answer_type"]))
        return groups

    def group_of(self, p: Parsed) -> tuple[tuple, str]:
        if p.kind.method == "classes":
            return (p.kind.key, p.dataset), f"the class names of {p.dataset}"
        first, *fallback = self.answer_groups(p)
        if len(self.pools.get(first, ())) < 4 and fallback:  # too few of this question type: the answer type's
            return fallback[0], f"majority answers of type {p.extra['answer_type']!r} in {p.dataset}"
        return first, f"majority answers to {p.group!r} questions in {p.dataset}"

    def prepare(self, parsed: Sequence[Parsed]) -> None:
        """Work shared by a window of annotations, done together: MiniLM vectors of the keys, accepted
        answers and pools they need; the nearest captions and strings of each key."""
        self.embed(parsed)
        self._near = {}
        for method in ("texts",) if self.settings.caption_uses is not None else ("captions", "texts"):
            if keys := sorted({p.key for p in parsed if p.kind.method == method}):
                self._nearest(method, keys)

    def embed(self, parsed: Sequence[Parsed]) -> None:
        """MiniLM vectors of what `parsed` will compare: keys, accepted answers and their pools."""
        wanted: set[str] = set()
        for p in parsed:
            if p.kind.method in ("answers", "classes"):
                group, _where = self.group_of(p)
                wanted.update([p.key, *p.accepted])
                if group not in self._matrices:
                    wanted.update(self.pools.get(group, ()))
        self.embeddings.add(wanted)

    def _index(self, method: str):
        import numpy as np
        if method not in self._indexes:
            from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

            if method == "captions":
                vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True, dtype=np.float32)
                corpus = [c for c, _i in self.captions]
            else:
                vectorizer = CountVectorizer(analyzer="char_wb", ngram_range=(2, 2), binary=True, dtype=np.float32)
                corpus = self.texts
            self._indexes[method] = (vectorizer, vectorizer.fit_transform(corpus).T.tocsr()) if corpus else None
        return self._indexes[method]

    def _nearest(self, method: str, keys: list[str], keep: int = 64) -> None:
        """For each key, the `keep` pool entries sharing the most (weighted) words or character pairs."""
        import numpy as np
        index = self._index(method)
        if index is None:
            self._near.update({(method, key): (np.zeros(0, np.int64), np.zeros(0, np.float32)) for key in keys})
            return
        vectorizer, matrix = index
        for start in range(0, len(keys), 64):  # some keys at a time: common words touch most of the pool
            chunk = keys[start:start + 64]
            scores = (vectorizer.transform(chunk) @ matrix).tocsr()
            for row, key in enumerate(chunk):
                begin, end = scores.indptr[row], scores.indptr[row + 1]
                columns, values = scores.indices[begin:end], scores.data[begin:end]
                if len(values) > keep:
                    top = np.argpartition(-values, keep)[:keep]
                    columns, values = columns[top], values[top]
                order = np.lexsort((columns, -values))
                self._near[(method, key)] = (columns[order], values[order])

    # each method: the usable candidates, hardest first, as (text, similarity to the key, how chosen)
    def _group_matrix(self, group: tuple):
        if group not in self._matrices:
            texts = self.pools.get(group, [])
            synonyms = [frozenset(answer_key(s) for s in [t, *t.split(",")] if s.strip()) for t in texts]
            self._matrices[group] = (self.embeddings.matrix(texts), texts, synonyms, [is_number(t) for t in texts])
        return self._matrices[group]

    def embedded_candidates(self, p: Parsed) -> list[tuple[str, float, str]]:
        group, where = self.group_of(p)
        # a function of the pool, the key and the accepted answers: class labels and common VQA answers recur
        return list(_cached(self._embedded, (group, p.key, p.accepted),
                            lambda: self._embedded_candidates(p, group, where)))

    def _embedded_candidates(self, p: Parsed, group: tuple, where: str) -> list[tuple[str, float, str]]:
        matrix, texts, synonyms, numbers = self._group_matrix(group)
        if not texts:
            return []
        banned = {answer_key(a) for a in (p.key, *p.accepted)}
        accepted, worded = self._accepted_matrices(p)
        to_key = matrix @ self.embeddings.vectors[p.key]
        out = []
        for i in _nearest_first(to_key, 4 * self.settings.hard_negative_pool + len(p.accepted)):
            # string-equal variants (and, for a class, a shared comma-separated synonym) name an accepted answer
            if synonyms[i] & banned:
                continue
            against = worded if numbers[i] else accepted  # a number is compared with numbers as numbers only
            if len(against) and float((against @ matrix[i]).max()) >= self.settings.synonym_similarity:
                continue  # a synonym of an accepted answer
            out.append((texts[i], float(to_key[i]), f"MiniLM nearest to the key among {where}"))
            if len(out) == self.settings.hard_negative_pool:
                break
        return out

    def _accepted_matrices(self, p: Parsed) -> tuple[np.ndarray, np.ndarray]:
        """MiniLM vectors of every accepted answer, and of those that are not numbers."""
        import numpy as np
        accepted = list(dict.fromkeys([p.key, *p.accepted]))
        worded = [a for a in accepted if not is_number(a)]
        return (self.embeddings.matrix(accepted),
                self.embeddings.matrix(worded) if worded else np.zeros((0, 0), np.float32))

    def caption_candidates(self, p: Parsed, item_id: str,
                           free: Callable[[str], bool] | None = None) -> list[tuple[str, float, str]]:
        """Other images' captions, those sharing the most weighted words with the key first, at most one
        from each image (two captions of one photo would tell each other apart from the key). Where the
        image comes with objects, only captions that name something it lacks (`contradicts`). When the
        nearest run short, any other image's caption will do, in an order drawn from the key, where each is
        shown wrong or where `free` (whether a caption, `normalise_text`, may still be used: `_plan_captions`)
        has taken the nearest."""
        own = {normalise_text(c) for c in p.accepted}
        own_words = [word_set(a) for a in p.accepted]
        paraphrase, proven = self.settings.paraphrase_overlap, bool(p.extra["objects"])
        out, seen, images = [], set(), {item_id}
        columns, scores = self._near[("captions", p.key)]
        near = zip(columns.tolist(), scores.tolist(), itertools.repeat("TF-IDF word overlap with the key, a caption "
                                                                       "of another image"))
        if (proven or free is not None) and self.captions:   # shown wrong, or what the collection left
            start = int(stable_hash(p.key), 16) % len(self.captions)
            near = itertools.chain(near, ((i, 0.0, "a caption of another image, none nearer being usable")
                                          for i in self._ring(start)))
        for i, score, how in near:
            caption, other = self.captions[i]
            if other in images:
                continue
            key = normalise_text(caption)
            if key in own or key in seen or free is not None and not free(key):
                continue
            seen.add(key)
            words = word_set(caption)
            if any(jaccard(words, a) >= paraphrase for a in own_words):
                continue  # says what the image's own captions say
            if proven and not contradicts(self.mentions(p.dataset, caption), p.extra["objects"]):
                continue  # it may describe this image too: it names nothing the image's objects show it lacks
            images.add(other)
            out.append((caption, score, how + (" that names something this image lacks" if proven else "")))
            if len(out) == self.settings.hard_negative_pool:
                break
        return out

    def _ring(self, start: int) -> Iterator[int]:
        """The indices of `captions` from `start` round to the one before it, skipping those no question
        may use any more (a plan's later questions would otherwise walk past every caption used up)."""
        n = len(self.captions)
        if self._spent is None:
            yield from range(start, n)
            yield from range(start)
            return
        for low, high in ((start, n), (0, start)):
            i = self._next_usable(low)
            while i < high:
                yield i
                i = self._next_usable(i + 1)

    def _next_usable(self, i: int) -> int:
        """The first index from `i` on that a question may still use (`len(captions)`: none), the links
        walked shortened for the next call."""
        spent, root = self._spent, i
        while spent[root] != root:
            root = spent[root]
        while spent[i] != root:
            spent[i], i = root, spent[i]
        return root

    def text_candidates(self, p: Parsed) -> list[tuple[str, float, str]]:
        own = _folded(p.accepted)  # every string of the image (`read`), the key among them
        scored = []
        for i in self._near[("texts", p.key)][0][:24].tolist():
            text = self.texts[i]
            if text in own:
                continue
            scored.append((self.text_surface[text], edit_similarity(p.key, text)))
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return [(text, sim, "edit-distance neighbour of the key among other images' texts")
                for text, sim in scored[:self.settings.hard_negative_pool]]

    def region_candidates(self, p: Parsed) -> list[tuple[str, float, str]]:
        import numpy as np
        target: Box = p.extra["box"]
        target_area = (target[2] - target[0]) * (target[3] - target[1])
        out = []
        for box, category in p.extra["regions"]:
            if iou(box, target) >= self.settings.max_box_overlap:
                continue  # could be the referent itself
            same = bool(p.extra["category"]) and category == p.extra["category"]
            ratio = (box[2] - box[0]) * (box[3] - box[1]) / target_area
            closeness = float(same) + 1 / (1 + abs(float(np.log(ratio))))
            out.append((box_text(box), closeness, "another region of the image" + (
                f" of the referent's category ({category})" if same else "")))
        out.sort(key=lambda c: (-c[1], c[0]))
        return out[:self.settings.hard_negative_pool]

    def candidates(self, p: Parsed, item_id: str) -> list[tuple[str, float, str]] | str:
        """The usable candidates, hardest first; a caption question under `caption_uses` gets the three
        its plan chose, or the reason it has none."""
        method = p.kind.method
        if method in ("answers", "classes"):
            return self.embedded_candidates(p)
        if method == "captions":
            if self.settings.caption_uses is not None:
                return self.caption_plan[(item_id, p.annotation)]
            return self.caption_candidates(p, item_id)
        if method == "texts":
            return self.text_candidates(p)
        return self.region_candidates(p)

    def is_synonym(self, p: Parsed, text: str) -> bool:
        """Whether `text` (an LLM's distractor) says what an accepted answer says."""
        if answer_key(text) in {answer_key(a) for a in (p.key, *p.accepted)}:
            return True
        if p.kind.method in ("answers", "classes"):
            self.embeddings.add([text, p.key, *p.accepted])
            accepted, worded = self._accepted_matrices(p)
            against = worded if is_number(text) else accepted
            return bool(len(against)) and float((against @ self.embeddings.vectors[text]).max()) >= self.settings.synonym_similarity
        if p.kind.method == "captions":
            return (max(word_overlap(text, a) for a in p.accepted) >= self.settings.paraphrase_overlap
                    or bool(p.extra["objects"]) and not contradicts(self.mentions(p.dataset, text), p.extra["objects"]))
        return text.casefold() in {a.casefold() for a in p.accepted}

    def similarity(self, p: Parsed, options: Sequence[str]) -> list[list[float]]:
        """Pairwise similarity of the key and candidates under the method's own measure."""
        method = p.kind.method
        if method in ("answers", "classes"):
            vectors = self.embeddings.matrix(options)
            return (vectors @ vectors.T).tolist()
        if method == "regions":
            centres = [[float(v) for v in re.findall(r"[\d.]+", o)] for o in options]
            return [[-abs(a[0] + a[2] - b[0] - b[2]) - abs(a[1] + a[3] - b[1] - b[3]) for b in centres]
                    for a in centres]
        measure = word_overlap if method == "captions" else edit_similarity
        n = len(options)
        out = [[0.0] * n for _ in range(n)]
        for i, j in itertools.combinations(range(n), 2):
            out[i][j] = out[j][i] = measure(options[i], options[j])
        return out

    def key_ranks(self, p: Parsed, options: Sequence[str]) -> bytes:
        """`key_ranks` of the options' similarity; kept per option set where options recur, a few bytes
        each: class labels, common VQA answers and strings that several images show meet the same
        candidates again."""
        if p.kind.method not in ("answers", "classes", "texts"):
            return key_ranks(self.similarity(p, options))
        return _cached(self._ranked, (p.kind.method, tuple(options)), lambda: key_ranks(self.similarity(p, options)))
