/* The local log's frame decoder in C: frames.decode_records without a Python call per record.
 *
 * The same contract as frames.decode_frames building record tuples (see frames.py for the frame
 * layout): it appends to `out` one `record_type` tuple (topic, partition, offset, key, value,
 * timestamp_ms, headers) per frame with min_offset <= offset < stop_offset, CRC-checks every frame
 * it passes (skipped ones too), and returns (position, next_offset, status, error). `error` is
 * None or (position, reason, offset) for damaged bytes, which frames.py raises as FrameError;
 * the records decoded before the damage stay appended, as in the Python decoder.
 *
 * Built by `make compiled` (scripts/compile_hot_path.py) beside the mypyc modules, removed by
 * `make pure`; without it frames.py decodes in Python. tests/cdc/streams/test_native_frames.py
 * holds both to the same output.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <zlib.h>

#define MAGIC 1
#define HEADER_SIZE 35 /* u32 length, u32 crc, u8 magic, i64 offset, i64 ts, i32 klen, i32 vlen, u16 hcount */
#define TAIL_SIZE 27
#define MAX_FRAME_BYTES (1LL << 30)
#define NEED_MORE 0
#define STOPPED 1
#define FULL 2

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64_at(const unsigned char *p) {
    return (uint64_t)u32_at(p) | (uint64_t)u32_at(p + 4) << 32;
}

static uint16_t u16_at(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static PyObject *damage(Py_ssize_t pos, const char *reason, int has_offset, long long offset) {
    if (has_offset) return Py_BuildValue("(nsL)", pos, reason, offset);
    return Py_BuildValue("(nsO)", pos, reason, Py_None);
}

/* The headers of a frame as Python builds them (frames._decode_headers), or NULL with *bad set
 * when they overrun the frame; *p moves past them. */
static PyObject *decode_headers(const unsigned char *buf, Py_ssize_t *p, Py_ssize_t frame_end,
                                unsigned count, int *bad) {
    PyObject *items = PyList_New(0);
    if (items == NULL) return NULL;
    for (unsigned i = 0; i < count; i++) {
        if (*p + 6 > frame_end) break;
        Py_ssize_t name_len = u16_at(buf + *p), value_len = u32_at(buf + *p + 2);
        Py_ssize_t name_at = *p + 6, value_at = name_at + name_len;
        if (value_at + value_len > frame_end) { /* Python's slices would run past the frame */
            *bad = 1;
            Py_DECREF(items);
            return NULL;
        }
        PyObject *item = Py_BuildValue(
            "(Ny#)", PyUnicode_DecodeUTF8((const char *)buf + name_at, name_len, "replace"),
            (const char *)buf + value_at, value_len);
        if (item == NULL || PyList_Append(items, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(items);
            return NULL;
        }
        Py_DECREF(item);
        *p = value_at + value_len;
    }
    PyObject *headers = PyList_AsTuple(items);
    Py_DECREF(items);
    return headers;
}

static PyObject *bytes_or_none(const unsigned char *at, long length) {
    if (length < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)at, length);
}

/* One record tuple of `type` (a tuple subclass), or NULL with an exception set. */
static PyObject *new_record(PyTypeObject *type, PyObject *topic, PyObject *partition,
                            long long offset, PyObject *key, PyObject *value, long long ts,
                            PyObject *headers) {
    PyObject *off = PyLong_FromLongLong(offset), *stamp = PyLong_FromLongLong(ts);
    PyObject *record = (off && stamp) ? type->tp_alloc(type, 7) : NULL;
    if (record == NULL) {
        Py_XDECREF(off);
        Py_XDECREF(stamp);
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        return NULL;
    }
    Py_INCREF(topic);
    Py_INCREF(partition);
    PyObject *items[7] = {topic, partition, off, key, value, stamp, headers};
    for (int i = 0; i < 7; i++) PyTuple_SET_ITEM(record, i, items[i]);
    return record;
}

#define FRAME_OK 3
#define DAMAGED 4

/* The frame at `pos` checked (magic, length, stop, CRC): FRAME_OK with *offset and *frame_end
 * set; NEED_MORE at a partial frame; STOPPED at a frame at or past `stop_offset`; DAMAGED with
 * *error set (NULL with an exception set if that failed). */
static int next_frame(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end,
                      long long stop_offset, long long *offset, Py_ssize_t *frame_end,
                      PyObject **error) {
    if (pos + HEADER_SIZE > end) return NEED_MORE;
    const unsigned char *h = buf + pos;
    long long length = u32_at(h);
    *offset = (long long)u64_at(h + 9);
    if (h[8] != MAGIC || length < TAIL_SIZE || length > MAX_FRAME_BYTES) {
        *error = damage(pos, "not a frame header", 0, 0);
        return DAMAGED;
    }
    *frame_end = pos + 8 + (Py_ssize_t)length;
    if (*frame_end > end) return NEED_MORE;
    if (*offset >= stop_offset) return STOPPED;
    if ((uint32_t)crc32(0L, h + 8, (uInt)length) != u32_at(h + 4)) {
        *error = damage(pos, "frame CRC mismatch", 1, *offset);
        return DAMAGED;
    }
    return FRAME_OK;
}

static PyObject *decode_records(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, max_records;
    long long min_offset, stop_offset;
    PyObject *topic, *partition, *type, *out;
    if (!PyArg_ParseTuple(args, "y*nnLLnOOO!O!", &view, &pos, &end, &min_offset, &stop_offset,
                          &max_records, &topic, &partition, &PyType_Type, &type, &PyList_Type,
                          &out))
        return NULL;
    PyObject *ret = NULL, *error = NULL;
    if (!PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple type");
        goto done;
    }
    if (pos < 0 || end > view.len || pos > end) {
        PyErr_SetString(PyExc_ValueError, "position or end outside the buffer");
        goto done;
    }
    const unsigned char *buf = view.buf;
    long long next_offset = -1;
    Py_ssize_t count = 0;
    int status = FULL;
    while (count < max_records) {
        long long offset;
        Py_ssize_t frame_end;
        int found = next_frame(buf, pos, end, stop_offset, &offset, &frame_end, &error);
        if (found != FRAME_OK) {
            if (found != DAMAGED) status = found;
            break;
        }
        const unsigned char *h = buf + pos;
        if (offset >= min_offset) {
            long long ts = (long long)u64_at(h + 17);
            int32_t klen = (int32_t)u32_at(h + 25), vlen = (int32_t)u32_at(h + 29);
            unsigned hcount = u16_at(h + 33);
            Py_ssize_t p = pos + HEADER_SIZE;
            Py_ssize_t key_at = p, value_at = key_at + (klen > 0 ? klen : 0);
            p = value_at + (vlen > 0 ? vlen : 0);
            int bad = klen < -1 || vlen < -1 || p > frame_end;
            PyObject *headers = NULL;
            if (!bad) {
                headers = hcount ? decode_headers(buf, &p, frame_end, hcount, &bad)
                                 : PyTuple_New(0);
                if (headers == NULL && !bad) goto done;
            }
            if (bad || p != frame_end) {
                Py_XDECREF(headers);
                error = damage(pos, "frame lengths do not add up", 1, offset);
                break;
            }
            PyObject *key = bytes_or_none(buf + key_at, klen);
            PyObject *value = key ? bytes_or_none(buf + value_at, vlen) : NULL;
            if (key == NULL || value == NULL) {
                Py_XDECREF(key);
                Py_DECREF(headers);
                goto done;
            }
            PyObject *record = new_record((PyTypeObject *)type, topic, partition, offset, key,
                                          value, ts, headers);
            if (record == NULL) goto done;
            int appended = PyList_Append(out, record);
            Py_DECREF(record);
            if (appended < 0) goto done;
            count++;
            next_offset = offset + 1;
        }
        pos = frame_end;
    }
    if (error == NULL && PyErr_Occurred()) goto done;
    if (error == NULL) ret = Py_BuildValue("(nLiO)", pos, next_offset, status, Py_None);
    else ret = Py_BuildValue("(nLiN)", pos, next_offset, status, error);
done:
    PyBuffer_Release(&view);
    return ret;
}

/* The extent of a frame's headers (decode_headers' checks, nothing built): *p moves past them. */
static void skip_headers(const unsigned char *buf, Py_ssize_t *p, Py_ssize_t frame_end,
                         unsigned count, int *bad) {
    for (unsigned i = 0; i < count; i++) {
        if (*p + 6 > frame_end) break;
        Py_ssize_t value_at = *p + 6 + u16_at(buf + *p), value_len = u32_at(buf + *p + 2);
        if (value_at + value_len > frame_end) {
            *bad = 1;
            return;
        }
        *p = value_at + value_len;
    }
}

/* Where a frame is, as `live`/`gone`/`each` hold it: `tag` (the segment's, above bit 40) + pos. */
static PyObject *place(long long tag, Py_ssize_t pos) { return PyLong_FromLongLong(tag + pos); }

/* compact_frames: decode_records' walk over the frames (the same checks and stops), keeping per
 * key only where its newest frame with a value (`live`) and its newest tombstone after it
 * (`gone`) are, as latest.compact_records keeps records; frames of a null key or a key in
 * `each_keys` each in `each`. No record is built: the caller decodes the survivors' frames. */
static PyObject *compact_frames(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    long long min_offset, stop_offset, tag;
    PyObject *each_keys, *live, *gone, *each;
    if (!PyArg_ParseTuple(args, "y*nnLLLO!O!O!O!", &view, &pos, &end, &min_offset, &stop_offset,
                          &tag, &PyFrozenSet_Type, &each_keys, &PyDict_Type, &live,
                          &PyDict_Type, &gone, &PyList_Type, &each))
        return NULL;
    PyObject *ret = NULL, *error = NULL;
    if (pos < 0 || end > view.len || pos > end || tag < 0 || end >= (1LL << 40)) {
        PyErr_SetString(PyExc_ValueError, "position, end or tag outside their bounds");
        goto done;
    }
    const unsigned char *buf = view.buf;
    long long next_offset = -1;
    Py_ssize_t count = 0;
    int status = NEED_MORE;
    for (;;) {
        long long offset;
        Py_ssize_t frame_end;
        int found = next_frame(buf, pos, end, stop_offset, &offset, &frame_end, &error);
        if (found != FRAME_OK) {
            if (found == STOPPED) status = STOPPED;
            break;
        }
        const unsigned char *h = buf + pos;
        if (offset >= min_offset) {
            int32_t klen = (int32_t)u32_at(h + 25), vlen = (int32_t)u32_at(h + 29);
            Py_ssize_t p = pos + HEADER_SIZE + (klen > 0 ? klen : 0) + (vlen > 0 ? vlen : 0);
            int bad = klen < -1 || vlen < -1 || p > frame_end;
            if (!bad) skip_headers(buf, &p, frame_end, u16_at(h + 33), &bad);
            if (bad || p != frame_end) {
                error = damage(pos, "frame lengths do not add up", 1, offset);
                break;
            }
            PyObject *at = place(tag, pos);
            if (at == NULL) goto done;
            int failed;
            if (klen < 0) {
                failed = PyList_Append(each, at);
            } else {
                PyObject *key = PyBytes_FromStringAndSize((const char *)h + HEADER_SIZE, klen);
                int listed = key ? PySet_Contains(each_keys, key) : -1;
                if (listed < 0) failed = -1;
                else if (listed) failed = PyList_Append(each, at);
                else if (vlen < 0) failed = PyDict_SetItem(gone, key, at);
                else {
                    failed = PyDict_SetItem(live, key, at);
                    int held = failed || !PyDict_GET_SIZE(gone) ? 0 : PyDict_Contains(gone, key);
                    failed = held < 0 ? -1 : held ? PyDict_DelItem(gone, key) : failed;
                }
                Py_XDECREF(key);
            }
            Py_DECREF(at);
            if (failed < 0) goto done;
            count++;
            next_offset = offset + 1;
        }
        pos = frame_end;
    }
    if (error == NULL && PyErr_Occurred()) goto done;
    if (error == NULL) ret = Py_BuildValue("(nLinO)", pos, next_offset, status, count, Py_None);
    else ret = Py_BuildValue("(nLinN)", pos, next_offset, status, count, error);
done:
    PyBuffer_Release(&view);
    return ret;
}

/* frames_at: the records of frames compact_frames placed (`places`: a segment's index in
 * `buffers` above bit 40, the frame's position below), in order. Those frames were checked by
 * that pass over the same bytes (a committed segment's bytes do not change): only bounds are. */
static PyObject *frames_at(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *buffers, *places, *topic, *partition, *type;
    if (!PyArg_ParseTuple(args, "O!O!OOO!", &PyList_Type, &buffers, &PyList_Type, &places, &topic,
                          &partition, &PyType_Type, &type))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple type");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(buffers), acquired = 0;
    Py_buffer *views = PyMem_Calloc(count ? count : 1, sizeof(Py_buffer));
    PyObject *out = views ? PyList_New(PyList_GET_SIZE(places)) : PyErr_NoMemory();
    if (out == NULL) goto failed;
    for (; acquired < count; acquired++)
        if (PyObject_GetBuffer(PyList_GET_ITEM(buffers, acquired), &views[acquired],
                               PyBUF_SIMPLE) < 0)
            goto failed;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(places); i++) {
        long long at = PyLong_AsLongLong(PyList_GET_ITEM(places, i));
        if (at == -1 && PyErr_Occurred()) goto failed;
        long long index = at >> 40;
        Py_ssize_t pos = (Py_ssize_t)(at & ((1LL << 40) - 1));
        if (at < 0 || index >= count || pos + HEADER_SIZE > views[index].len) goto outside;
        const unsigned char *buf = views[index].buf, *h = buf + pos;
        Py_ssize_t frame_end = pos + 8 + (Py_ssize_t)u32_at(h);
        int32_t klen = (int32_t)u32_at(h + 25), vlen = (int32_t)u32_at(h + 29);
        Py_ssize_t key_at = pos + HEADER_SIZE, value_at = key_at + (klen > 0 ? klen : 0);
        Py_ssize_t p = value_at + (vlen > 0 ? vlen : 0);
        if (frame_end > views[index].len || klen < -1 || vlen < -1 || p > frame_end) goto outside;
        int bad = 0;
        unsigned hcount = u16_at(h + 33);
        PyObject *headers = hcount ? decode_headers(buf, &p, frame_end, hcount, &bad)
                                   : PyTuple_New(0);
        if (headers == NULL) {
            if (bad) goto outside;
            goto failed;
        }
        PyObject *key = bytes_or_none(buf + key_at, klen);
        PyObject *value = key ? bytes_or_none(buf + value_at, vlen) : NULL;
        if (value == NULL) {
            Py_XDECREF(key);
            Py_DECREF(headers);
            goto failed;
        }
        PyObject *record = new_record((PyTypeObject *)type, topic, partition,
                                      (long long)u64_at(h + 9), key, value,
                                      (long long)u64_at(h + 17), headers);
        if (record == NULL) goto failed;
        PyList_SET_ITEM(out, i, record);
    }
    goto released;
outside:
    PyErr_SetString(PyExc_ValueError, "a placed frame is outside its segment's bytes");
failed:
    Py_CLEAR(out);
released:
    for (Py_ssize_t i = 0; i < acquired; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    return out;
}

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(buf, pos, end, min_offset, stop_offset, max_records, topic, partition, "
     "record_type, out) -> (position, next_offset, status, error)"},
    {"compact_frames", compact_frames, METH_VARARGS,
     "compact_frames(buf, pos, end, min_offset, stop_offset, tag, each_keys, live, gone, each) "
     "-> (position, next_offset, status, records, error)"},
    {"frames_at", frames_at, METH_VARARGS,
     "frames_at(buffers, places, topic, partition, record_type) -> [record, ...]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "native_frames", "The local log's frame decoder in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_native_frames(void) { return PyModule_Create(&module); }
