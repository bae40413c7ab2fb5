// Parquet through Apache Arrow's C++ library (cmake -DASYNCRL_PARQUET=ON). Only this file
// includes Arrow, and only it is compiled as C++20: Arrow 26's headers use std::span and
// std::bit_width, and do not compile as C++17 (the rest of asyncrl). Nothing of Arrow's crosses
// its interface (strings and nlohmann::json only), so the two standards never share a type whose
// layout could differ. Without the option this file only says that Parquet is not built in.

#include "runtime/task/parquet_data.hpp"

#include <nlohmann/json.hpp>

#if ASYNCRL_PARQUET

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/metadata.h>

namespace asyncrl {

namespace {

// Thrown for a column whose type has no JSON reading; caught below to name file and column.
struct unsupported_type : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class ArrayType>
nlohmann::json number_at(const arrow::Array& a, int64_t i) {
  return static_cast<const ArrayType&>(a).Value(i);
}

// The value at row i of `a`, as the JSONL reader would see it.
nlohmann::json value_at(const arrow::Array& a, int64_t i) {
  if (a.IsNull(i)) return nullptr;
  switch (a.type_id()) {
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(a).GetView(i));
    case arrow::Type::LARGE_STRING:
      return std::string(static_cast<const arrow::LargeStringArray&>(a).GetView(i));
    case arrow::Type::STRING_VIEW:
      return std::string(static_cast<const arrow::StringViewArray&>(a).GetView(i));
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(a).Value(i);
    case arrow::Type::INT8:
      return number_at<arrow::Int8Array>(a, i);
    case arrow::Type::INT16:
      return number_at<arrow::Int16Array>(a, i);
    case arrow::Type::INT32:
      return number_at<arrow::Int32Array>(a, i);
    case arrow::Type::INT64:
      return number_at<arrow::Int64Array>(a, i);
    case arrow::Type::UINT8:
      return number_at<arrow::UInt8Array>(a, i);
    case arrow::Type::UINT16:
      return number_at<arrow::UInt16Array>(a, i);
    case arrow::Type::UINT32:
      return number_at<arrow::UInt32Array>(a, i);
    case arrow::Type::UINT64:
      return number_at<arrow::UInt64Array>(a, i);
    case arrow::Type::FLOAT:
      return number_at<arrow::FloatArray>(a, i);
    case arrow::Type::DOUBLE:
      return number_at<arrow::DoubleArray>(a, i);
    case arrow::Type::STRUCT: {  // verl's reward_model: {ground_truth, style}
      const auto& s = static_cast<const arrow::StructArray&>(a);
      auto obj = nlohmann::json::object();
      for (int f = 0; f < s.num_fields(); ++f)
        obj[s.struct_type()->field(f)->name()] = value_at(*s.field(f), i);
      return obj;
    }
    case arrow::Type::LIST: {  // chat messages: list<struct<content, role>>
      const auto& l = static_cast<const arrow::ListArray&>(a);
      auto arr = nlohmann::json::array();
      for (int64_t j = l.value_offset(i); j < l.value_offset(i) + l.value_length(i); ++j)
        arr.push_back(value_at(*l.values(), j));
      return arr;
    }
    case arrow::Type::LARGE_LIST: {
      const auto& l = static_cast<const arrow::LargeListArray&>(a);
      auto arr = nlohmann::json::array();
      for (int64_t j = l.value_offset(i); j < l.value_offset(i) + l.value_length(i); ++j)
        arr.push_back(value_at(*l.values(), j));
      return arr;
    }
    case arrow::Type::DICTIONARY: {  // pandas categoricals
      const auto& d = static_cast<const arrow::DictionaryArray&>(a);
      return value_at(*d.dictionary(), d.GetValueIndex(i));
    }
    default:
      throw unsupported_type("type " + a.type()->ToString() +
                             " is not read (strings, numbers, bools, structs and lists are)");
  }
}

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw data_error(file + ": " + what);
}

}  // namespace

bool parquet_built_in() {
  return true;
}

void read_parquet_rows(const std::string& file, const std::vector<std::string>& columns,
                       const std::vector<std::string>& keys, const parquet_row_fn& each) {
  // Arrow reports through Status, but parquet-cpp can still throw ParquetException (a damaged
  // footer's thrift): both become data_error naming the file.
  try {
    auto in = arrow::io::ReadableFile::Open(file);
    if (!in.ok()) fail(file, "cannot open: " + in.status().message());
    // Pages written with CRCs (pyarrow's write_page_checksum) are checked: a damaged page is
    // then an error, not wrong text. Pages without one (the default writers') cannot be.
    parquet::ReaderProperties props;
    props.set_page_checksum_verification(true);
    parquet::arrow::FileReaderBuilder builder;
    if (auto st = builder.Open(*in, props); !st.ok())
      fail(file, "not a readable Parquet file: " + st.message());
    std::unique_ptr<parquet::arrow::FileReader> reader;
    if (auto st = builder.Build(&reader); !st.ok())
      fail(file, "not a readable Parquet file: " + st.message());
    std::shared_ptr<arrow::Schema> schema;
    if (auto st = reader->GetSchema(&schema); !st.ok())
      fail(file, "not a readable Parquet file: " + st.message());

    std::vector<int> index;
    for (size_t c = 0; c < columns.size(); ++c) {
      index.push_back(schema->GetFieldIndex(columns[c]));
      if (index.back() >= 0) continue;
      std::string names;
      for (const auto& f : schema->fields())
        names += (names.empty() ? "" : ", ") + f->name();
      fail(file, "no column '" + columns[c] + "' (" + keys.at(c) + "); its columns: " + names);
    }

    // Row group by row group and column by column, so that a damaged page is named by both.
    // Only one row group's columns are held (as Arrow's compact arrays) and one row as JSON: a
    // million-row group held as JSON rows took 2.5 times the memory of the JSONL reader.
    const auto meta = reader->parquet_reader()->metadata();
    int64_t first = 0;
    for (int g = 0; g < reader->num_row_groups(); ++g) {
      const int64_t n = meta->RowGroup(g)->num_rows();
      const auto where = "rows " + std::to_string(first) + ".." + std::to_string(first + n - 1) +
                         " (row group " + std::to_string(g) + ")";
      std::vector<std::shared_ptr<arrow::ChunkedArray>> values(columns.size());
      for (size_t c = 0; c < columns.size(); ++c) {
        arrow::Status st;
        try {
          st = reader->RowGroup(g)->Column(index[c])->Read(&values[c]);
        } catch (const std::exception& e) {
          st = arrow::Status::IOError(e.what());
        }
        if (!st.ok()) fail(file, where + ", column '" + columns[c] + "': " + st.message());
        if (values[c]->length() != n)
          fail(file, where + ", column '" + columns[c] +
                         "': " + std::to_string(values[c]->length()) + " values for " +
                         std::to_string(n) + " rows");
      }
      // Each column's cursor: its chunk and the row within it (all advance together).
      std::vector<std::pair<int, int64_t>> at(columns.size(), {0, 0});
      for (int64_t r = 0; r < n; ++r) {
        auto row = nlohmann::json::object();
        for (size_t c = 0; c < columns.size(); ++c) {
          auto& [k, i] = at[c];
          while (i == values[c]->chunk(k)->length()) {  // the next chunk (skipping empty ones)
            ++k;
            i = 0;
          }
          try {
            row[columns[c]] = value_at(*values[c]->chunk(k), i++);
          } catch (const unsupported_type& e) {
            fail(file, "column '" + columns[c] + "' (" + keys.at(c) + "): " + e.what());
          }
        }
        each(row, first + r);
      }
      first += n;
    }
  } catch (const data_error&) {
    throw;
  } catch (const std::exception& e) {
    fail(file, std::string("not a readable Parquet file: ") + e.what());
  }
}

}  // namespace asyncrl

#else  // !ASYNCRL_PARQUET

namespace asyncrl {

bool parquet_built_in() {
  return false;
}

void read_parquet_rows(const std::string& file, const std::vector<std::string>&,
                       const std::vector<std::string>&, const parquet_row_fn&) {
  throw data_error(file +
                   ": this asyncrl was built without Parquet (cmake -DASYNCRL_PARQUET=ON);"
                   " convert it with scripts/parquet_to_jsonl.py");
}

}  // namespace asyncrl

#endif
