//! The S3 client's reading of S3's answers, on answers as servers write them.

use super::*;

/// The names of the tests: what S3 servers escape in XML (`&`, `<`, `>`, `"`, `'`),
/// what means something in URLs and forms (`%`, `+`, a space), and non-ASCII.
const KEYS: [&str; 5] = [
    "served/a&b <c>.txt",
    "served/say \"hi\", it's.txt",
    "served/100% a+b.txt",
    "served/&amp;&#39;.txt",
    "served/gr\u{fc}\u{df}e \u{65e5}\u{672c}.txt",
];

fn keys(page: &ListPage) -> Vec<&str> {
    page.objects.iter().map(|o| o.key.as_str()).collect()
}

/// As versitygw answers (Go's encoding/xml): no `<EncodingType>`, whatever was asked,
/// and `"` and `'` as character references.
#[test]
fn a_listing_escaped_as_xml_keeps_its_keys() {
    let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>files</Name><Prefix>served/</Prefix><KeyCount>6</KeyCount><MaxKeys>1000</MaxKeys>
  <Delimiter>/</Delimiter><IsTruncated>false</IsTruncated>
  <Contents><Key>served/a&amp;b &lt;c&gt;.txt</Key><LastModified>2026-01-02T03:04:05.5Z</LastModified><ETag>&#34;e1&#34;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>served/say &#34;hi&#34;, it&#39;s.txt</Key><ETag>&quot;e2&quot;</ETag><Size>4</Size></Contents>
  <Contents><Key>served/100% a+b.txt</Key><Size>5</Size></Contents>
  <Contents><Key>served/&amp;amp;&amp;#39;.txt</Key><Size>6</Size></Contents>
  <Contents><Key>served/gr&#xFC;ße &#26085;本.txt</Key><Size>7</Size></Contents>
  <CommonPrefixes><Prefix>served/sub &amp;&#39;&#34;/</Prefix></CommonPrefixes>
</ListBucketResult>"#;
    let page = listing("served/", body.as_bytes()).unwrap();
    assert_eq!(keys(&page), KEYS);
    assert_eq!(page.prefixes, vec!["served/sub &'\"/".to_owned()]);
    assert_eq!(page.objects[0].etag, "e1");
    assert_eq!(page.objects[0].size, 3);
    assert_eq!(page.objects[0].modified_unix_ns, 1_767_323_045_500_000_000);
    assert_eq!(page.objects[1].etag, "e2");
    assert_eq!(page.objects[2].modified_unix_ns, 0, "no time given");
    assert_eq!(page.next, None);
}

/// As AWS S3 and MinIO answer `encoding-type=url`: keys and prefixes percent-encoded,
/// a space as `+` and a `+` as `%2B`.
#[test]
fn a_url_encoded_listing_is_decoded() {
    let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>files</Name><Prefix>served%2F</Prefix><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>
  <Contents><Key>served/a%26b+%3Cc%3E.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/say+%22hi%22%2C+it%27s.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/100%25+a%2Bb.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/%26amp%3B%26%2339%3B.txt</Key><Size>1</Size></Contents>
  <Contents><Key>served/gr%C3%BC%C3%9Fe+%E6%97%A5%E6%9C%AC.txt</Key><Size>1</Size></Contents>
  <CommonPrefixes><Prefix>served/sub+%26%27%22/</Prefix></CommonPrefixes>
</ListBucketResult>"#;
    let page = listing("served/", body.as_bytes()).unwrap();
    assert_eq!(keys(&page), KEYS);
    assert_eq!(page.prefixes, vec!["served/sub &'\"/".to_owned()]);
}

#[test]
fn an_empty_listing_has_nothing_and_no_next_page() {
    let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>files</Name><Prefix>served/none/</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>false</IsTruncated></ListBucketResult>"#;
    let page = listing("served/none/", body.as_bytes()).unwrap();
    assert!(page.objects.is_empty() && page.prefixes.is_empty() && page.next.is_none());
}

#[test]
fn a_truncated_listing_says_where_the_next_page_starts() {
    let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>files</Name><Prefix>served/</Prefix><KeyCount>1</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>true</IsTruncated>
  <Contents><Key>served/a&amp;b</Key><Size>1</Size></Contents>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;+</NextContinuationToken>
</ListBucketResult>"#;
    let page = listing("served/", body.as_bytes()).unwrap();
    assert_eq!(keys(&page), ["served/a&b"]);
    assert_eq!(
        page.next.as_deref(),
        Some("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&+"),
        "the token as it is, only unescaped"
    );
    let cut = body
        .replace("<NextContinuationToken>", "<Other>")
        .replace("</NextContinuationToken>", "</Other>");
    let refused = listing("served/", cut.as_bytes()).unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::Internal,
        "a truncated page without a token"
    );
    assert!(
        refused.message().contains("did not parse"),
        "{}",
        refused.message()
    );
}

#[test]
fn a_refusal_says_the_servers_code_and_message() {
    let body = Bytes::from_static(
        b"<Error><Details><Code>Nested</Code></Details><Code>NoSuchKey</Code><Message>No &lt;key&gt; &#34;a&amp;b&#34;</Message><Key>a&amp;b</Key></Error>",
    );
    let status = refused("GetObject", "a&b", StatusCode::NOT_FOUND, &body);
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(
        status.message(),
        "GetObject a&b: the S3 server answered 404 Not Found NoSuchKey No <key> \"a&b\""
    );
    let throttled = refused("PutObject", "k", StatusCode::SERVICE_UNAVAILABLE, &Bytes::new());
    assert_eq!(throttled.code(), tonic::Code::Unavailable);
}

#[test]
fn a_200_with_an_error_inside_is_a_failure() {
    let late = Bytes::from_static(b"<Error><Code>InternalError</Code><Message>try again</Message></Error>");
    let status = completed("CopyObject", "a", &late).unwrap_err();
    assert_eq!(status.code(), tonic::Code::Internal);
    assert!(
        status.message().contains("InternalError try again"),
        "{}",
        status.message()
    );
    let done = Bytes::from_static(b"<CopyObjectResult><ETag>&#34;e&#34;</ETag></CopyObjectResult>");
    assert_eq!(completed("CopyObject", "a", &done).unwrap(), "e");
}
