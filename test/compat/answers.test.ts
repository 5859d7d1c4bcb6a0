import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';

/**
 * The statements analysts, dashboards and agents write, run on cotwire and on
 * PostgreSQL over the same rows: every result column's name and type OID, and
 * every value as text, must agree. A statement that cannot agree must fail
 * with an error on cotwire, never answer differently.
 */
const servers = useCotwireAndPostgres();

const SCHEMA = [
  'CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, country varchar(2), created date, grade char(3))',
  'CREATE TABLE orders (id integer PRIMARY KEY, customer integer REFERENCES customers(id), amount numeric(10,2), qty integer, weight double precision, big bigint, note text, placed timestamp, paid boolean, tags text[], meta jsonb)',
  "INSERT INTO customers VALUES (1, 'Ada', 'UK', '2024-01-05', 'A'), (2, 'Grace', 'US', '2024-02-10', 'BB'), (3, 'Linus', 'FI', '2024-03-15', NULL), (4, 'Barbara', NULL, NULL, 'CCC')",
  `INSERT INTO orders VALUES
    (1, 1, 100.50, 3, 1.5, 9000000000, 'first_order', '2024-05-01 10:15:00', true, '{a,b}', '{"kind": "web", "score": 3}'),
    (2, 1, 167.25, 1, 2.25, 1, 'second 50%', '2024-05-17 18:30:45.5', false, '{b}', '{"kind": "shop", "score": 5}'),
    (3, 2, 99.99, 7, NULL, 42, NULL, '2024-06-02 00:00:00', true, '{}', '{"kind": "web"}'),
    (4, 3, 0.01, 10, 0.1, -5, 'tiny', '2024-06-30 23:59:59', NULL, NULL, NULL),
    (5, 3, 167.75, 2, 3.75, 7, 'C:\\path', '2024-07-04 12:00:00', true, '{c,a}', '{"kind": "web", "score": 4}')`,
];

/** The SQL:2003 keywords pgjdbc's getSQLKeywords leaves out of PostgreSQL's. */
const JDBC_SQL2003_KEYWORDS =
  'a,abs,absolute,action,ada,add,admin,after,all,allocate,alter,always,and,any,are,array,as,asc,asensitive,assertion,assignment,asymmetric,at,atomic,attribute,attributes,authorization,avg,before,begin,bernoulli,between,bigint,binary,blob,boolean,both,breadth,by,c,call,called,cardinality,cascade,cascaded,case,cast,catalog,catalog_name,ceil,ceiling,chain,char,char_length,character,character_length,character_set_catalog,character_set_name,character_set_schema,characteristics,characters,check,checked,class_origin,clob,close,coalesce,cobol,code_units,collate,collation,collation_catalog,collation_name,collation_schema,collect,column,column_name,command_function,command_function_code,commit,committed,condition,condition_number,connect,connection_name,constraint,constraint_catalog,constraint_name,constraint_schema,constraints,constructors,contains,continue,convert,corr,corresponding,count,covar_pop,covar_samp,create,cross,cube,cume_dist,current,current_collation,current_date,current_default_transform_group,current_path,current_role,current_time,current_timestamp,current_transform_group_for_type,current_user,cursor,cursor_name,cycle,data,date,datetime_interval_code,datetime_interval_precision,day,deallocate,dec,decimal,declare,default,defaults,deferrable,deferred,defined,definer,degree,delete,dense_rank,depth,deref,derived,desc,describe,descriptor,deterministic,diagnostics,disconnect,dispatch,distinct,domain,double,drop,dynamic,dynamic_function,dynamic_function_code,each,element,else,end,end-exec,equals,escape,every,except,exception,exclude,excluding,exec,execute,exists,exp,external,extract,false,fetch,filter,final,first,float,floor,following,for,foreign,fortran,found,free,from,full,function,fusion,g,general,get,global,go,goto,grant,granted,group,grouping,having,hierarchy,hold,hour,identity,immediate,implementation,in,including,increment,indicator,initially,inner,inout,input,insensitive,insert,instance,instantiable,int,integer,intersect,intersection,interval,into,invoker,is,isolation,join,k,key,key_member,key_type,language,large,last,lateral,leading,left,length,level,like,ln,local,localtime,localtimestamp,locator,lower,m,map,match,matched,max,maxvalue,member,merge,message_length,message_octet_length,message_text,method,min,minute,minvalue,mod,modifies,module,month,more,multiset,mumps,name,names,national,natural,nchar,nclob,nesting,new,next,no,none,normalize,normalized,not,"null",nullable,nullif,nulls,number,numeric,object,octet_length,octets,of,old,on,only,open,option,options,or,order,ordering,ordinality,others,out,outer,output,over,overlaps,overlay,overriding,pad,parameter,parameter_mode,parameter_name,parameter_ordinal_position,parameter_specific_catalog,parameter_specific_name,parameter_specific_schema,partial,partition,pascal,path,percent_rank,percentile_cont,percentile_disc,placing,pli,position,power,preceding,precision,prepare,preserve,primary,prior,privileges,procedure,public,range,rank,read,reads,real,recursive,ref,references,referencing,regr_avgx,regr_avgy,regr_count,regr_intercept,regr_r2,regr_slope,regr_sxx,regr_sxy,regr_syy,relative,release,repeatable,restart,result,return,returned_cardinality,returned_length,returned_octet_length,returned_sqlstate,returns,revoke,right,role,rollback,rollup,routine,routine_catalog,routine_name,routine_schema,row,row_count,row_number,rows,savepoint,scale,schema,schema_name,scope_catalog,scope_name,scope_schema,scroll,search,second,section,security,select,self,sensitive,sequence,serializable,server_name,session,session_user,set,sets,similar,simple,size,smallint,some,source,space,specific,specific_name,specifictype,sql,sqlexception,sqlstate,sqlwarning,sqrt,start,state,statement,static,stddev_pop,stddev_samp,structure,style,subclass_origin,submultiset,substring,sum,symmetric,system,system_user,table,table_name,tablesample,temporary,then,ties,time,timestamp,timezone_hour,timezone_minute,to,top_level_count,trailing,transaction,transaction_active,transactions_committed,transactions_rolled_back,transform,transforms,translate,translation,treat,trigger,trigger_catalog,trigger_name,trigger_schema,trim,true,type,uescape,unbounded,uncommitted,under,union,unique,unknown,unnamed,unnest,update,upper,usage,user,user_defined_type_catalog,user_defined_type_code,user_defined_type_name,user_defined_type_schema,using,value,values,var_pop,var_samp,varchar,varying,view,when,whenever,where,width_bucket,window,with,within,without,work,write,year,zone';

/** Statements whose answers must agree, value for value and type for type. */
const AGREE: readonly string[] = [
  // Counting and summing.
  'SELECT count(*), count(note), count(DISTINCT customer) FROM orders',
  'SELECT sum(qty), sum(amount), sum(weight), sum(big) FROM orders',
  'SELECT avg(qty), avg(amount), avg(weight), avg(big) FROM orders',
  'SELECT round(avg(amount), 2) AS avg_amount, round(avg(qty), 1) FROM orders',
  'SELECT round(avg(amount)::numeric, 4) FROM orders',
  'SELECT min(amount), max(amount), min(placed), max(note) FROM orders',
  'SELECT customer, count(*), sum(amount) AS total FROM orders GROUP BY customer ORDER BY customer',
  'SELECT customer, sum(qty) FILTER (WHERE paid) AS paid_qty, avg(amount) FILTER (WHERE paid) AS paid_avg FROM orders GROUP BY customer ORDER BY customer',
  'SELECT sum(DISTINCT qty), avg(DISTINCT qty) FROM orders',
  'SELECT customer, sum(amount) FROM orders GROUP BY customer HAVING sum(amount) > 100 ORDER BY 2 DESC',
  'SELECT sum(qty) FROM orders WHERE false',
  'SELECT avg(amount) FROM orders WHERE false',
  'SELECT bool_and(paid), bool_or(paid), every(qty > 0) FROM orders',
  "SELECT string_agg(note, ', ' ORDER BY id) FROM orders",
  'SELECT array_agg(id ORDER BY id DESC) FROM orders',
  // Arithmetic.
  'SELECT 7 / 2, -7 / 2, 7 % 3, 7.0 / 2, 1.0 / 3, 10 / 4.0',
  'SELECT amount / qty, amount * qty, amount + 1, amount - 0.005 FROM orders ORDER BY id',
  'SELECT qty / 2, qty::numeric / 3, qty * 1.5 FROM orders ORDER BY id',
  'SELECT weight / 2, weight * qty FROM orders ORDER BY id',
  'SELECT sum(amount) / count(*) AS mean, sum(qty) / count(*) AS int_mean FROM orders',
  'SELECT round(amount / 3, 2), round(2.5), round(-2.5), round(3.14159, 3) FROM orders ORDER BY id',
  'SELECT ceil(amount), floor(amount), abs(big), trunc(weight) FROM orders ORDER BY id',
  'SELECT 2 ^ 10, sqrt(16), power(2, 3), mod(17, 5), greatest(1, 3, 2), least(4, 2)',
  'SELECT 100.0 * sum(CASE WHEN paid THEN 1 ELSE 0 END) / count(*) AS pct_paid FROM orders',
  // Text.
  "SELECT upper(note), lower(note), length(note), note || '!' FROM orders ORDER BY id",
  "SELECT substring(note from 2 for 3), position('o' in note), replace(note, 'o', '0') FROM orders ORDER BY id",
  "SELECT split_part('a,b,c', ',', 2), left('hello', 2), right('hello', 2), lpad('7', 3, '0'), rpad('7', 3, '.')",
  "SELECT trim('  x  '), ltrim('xxy', 'x'), btrim('xyx', 'x'), concat('a', NULL, 'b'), concat_ws('-', 'a', 'b')",
  "SELECT initcap('hello world'), reverse('abc'), repeat('ab', 3), strpos('hello', 'l'), md5('x')",
  "SELECT note FROM orders WHERE note LIKE '%\\_%' ORDER BY id",
  "SELECT note FROM orders WHERE note ILIKE 'FIRST%' OR note ~ 'ti.y' ORDER BY id",
  "SELECT format('%s has %s', name, country) FROM customers ORDER BY id",
  // Dates and times.
  'SELECT placed FROM orders ORDER BY id',
  "SELECT date_trunc('month', placed) AS month, count(*) FROM orders GROUP BY 1 ORDER BY 1",
  "SELECT date_trunc('day', placed), date_trunc('hour', placed) FROM orders ORDER BY id",
  'SELECT extract(year FROM placed), extract(month FROM placed), extract(dow FROM placed) FROM orders ORDER BY id',
  "SELECT date_part('day', placed), placed::date FROM orders ORDER BY id",
  "SELECT placed + interval '1 day', placed - interval '2 hours' FROM orders ORDER BY id",
  "SELECT created + 7, created - date '2024-01-01' FROM customers ORDER BY id",
  "SELECT to_char(placed, 'YYYY-MM-DD HH24:MI') FROM orders ORDER BY id",
  "SELECT placed FROM orders WHERE placed >= '2024-06-01' AND placed < '2024-07-01' ORDER BY id",
  "SELECT date '2024-03-01' - interval '1 day', timestamp '2024-01-31 10:00' + interval '1 month'",
  "SELECT interval '1 day 2 hours', interval '90 minutes', interval '1 year 2 months'",
  "SELECT make_date(2024, 2, 29), date '2024-02-29' + 1",
  // Conditionals and NULLs.
  "SELECT coalesce(note, '(none)'), nullif(qty, 1), CASE WHEN amount > 100 THEN 'big' ELSE 'small' END FROM orders ORDER BY id",
  'SELECT id FROM orders WHERE paid IS NOT TRUE ORDER BY id',
  'SELECT id, paid, paid IS NULL FROM orders ORDER BY id',
  // Joins, subqueries, CTEs, set operations.
  'SELECT c.name, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer = c.id GROUP BY c.name ORDER BY n DESC, c.name',
  'SELECT name FROM customers WHERE id IN (SELECT customer FROM orders WHERE amount > 100) ORDER BY name',
  'SELECT name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer = c.id)',
  'WITH t AS (SELECT customer, sum(amount) AS total FROM orders GROUP BY customer) SELECT c.name, t.total FROM t JOIN customers c ON c.id = t.customer ORDER BY t.total DESC',
  'SELECT id FROM orders WHERE qty > 2 UNION SELECT id FROM customers ORDER BY 1',
  'SELECT (SELECT max(amount) FROM orders) AS top, (SELECT count(*) FROM customers) AS n',
  // Window functions.
  'SELECT id, row_number() OVER (ORDER BY amount DESC), rank() OVER (ORDER BY qty) FROM orders ORDER BY id',
  'SELECT id, sum(amount) OVER (ORDER BY id) AS running, sum(qty) OVER (PARTITION BY customer) FROM orders ORDER BY id',
  'SELECT id, avg(amount) OVER (PARTITION BY customer), avg(qty) OVER () FROM orders ORDER BY id',
  'SELECT id, lag(amount) OVER (ORDER BY id), lead(qty, 1, 0) OVER (ORDER BY id) FROM orders ORDER BY id',
  'SELECT id, first_value(note) OVER (PARTITION BY customer ORDER BY id), count(*) OVER () FROM orders ORDER BY id',
  'SELECT id, ntile(2) OVER (ORDER BY id), percent_rank() OVER (ORDER BY id) FROM orders ORDER BY id',
  // Statistics.
  'SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM orders',
  'SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY qty) FROM orders',
  'SELECT stddev(weight), variance(weight) FROM orders',
  // Sets and series.
  'SELECT generate_series(1, 3)',
  'SELECT i FROM generate_series(1, 4) AS g(i)',
  "SELECT d::date FROM generate_series(date '2024-01-01', date '2024-01-03', interval '1 day') AS d",
  'SELECT tag, count(*) FROM (SELECT unnest(tags) AS tag FROM orders) s GROUP BY 1 ORDER BY 1',
  // Arrays.
  'SELECT tags, array_length(tags, 1), cardinality(tags) FROM orders ORDER BY id',
  "SELECT id FROM orders WHERE 'a' = ANY(tags) ORDER BY id",
  "SELECT ARRAY[1, 2, 3], ARRAY['x', 'y'], array_to_string(ARRAY[1, 2], ',')",
  // JSON.
  "SELECT meta->>'kind', (meta->>'score')::int + 1 FROM orders ORDER BY id",
  'SELECT id FROM orders WHERE meta @> \'{"kind": "web"}\' ORDER BY id',
  "SELECT id FROM orders WHERE meta ? 'score' ORDER BY id",
  "SELECT meta->>'kind' AS kind, count(*) FROM orders WHERE meta IS NOT NULL GROUP BY 1 ORDER BY 1",
  "SELECT jsonb_typeof(meta->'score') FROM orders ORDER BY id",
  // Sequelize's JSON filter: a text cast to a double or an integer.
  "SELECT id FROM orders WHERE CAST((meta#>>'{score}') AS DOUBLE PRECISION) = 5 OR CAST((meta#>>'{score}') AS integer) = 3 ORDER BY id",
  // What jsonb's operators and functions return is jsonb, printed as jsonb prints it.
  "SELECT meta->'score', meta || '{\"x\": [1, 2.50]}'::jsonb, jsonb_build_object('k', qty, 'a', note) FROM orders ORDER BY id",
  // ... and || of jsonb columns merges them, as the column's declared type says (DuckDB's JSON would join the texts).
  "SELECT meta || meta, o.meta || jsonb_build_object('k', 1), (meta -> 'tags') || (o.meta -> 'tags') FROM orders o ORDER BY id",
  // Numbers without silent rounding: literal digits, quotients and averages at PostgreSQL's scale, a parameter-free pg_typeof.
  "SELECT 1.23456789012345678901::numeric, '1e-20'::numeric, 100.00::numeric / 3, 1::numeric / 3, avg(qty), sum(amount) / count(*) FROM orders",
  "SELECT pg_typeof(1.5), pg_typeof('a'::text), pg_typeof(ARRAY['a'::text]), pg_typeof(now()), pg_typeof(amount), pg_typeof(meta) FROM orders WHERE id = 1",
  "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount), sqrt(amount), date_trunc('month', created) FROM orders, customers WHERE customers.id = orders.customer AND orders.id = 1",
  "SELECT string_to_array('', ','), 'x' = ANY(ARRAY['y', NULL]), substr('abc', -1), concat(true, 1.5::float8)",
  // Casts and literals.
  "SELECT 1::text, '42'::int, '3.5'::numeric, '3.5'::float8, 'true'::boolean, '2024-01-02'::date",
  'SELECT CAST(amount AS integer), CAST(qty AS text), amount::text FROM orders ORDER BY id',
  "SELECT '1.23456'::numeric, 1e3::numeric, 0.1 + 0.2, 0.1::float8 + 0.2::float8",
  'SELECT true AND NULL, false OR NULL, NOT true',
  'SELECT NULL::int IS NULL, 1 IS DISTINCT FROM NULL',
  // Limits and ordering.
  'SELECT id FROM orders ORDER BY weight NULLS FIRST, id LIMIT 3 OFFSET 1',
  'SELECT id, weight FROM orders ORDER BY weight DESC, id',
  'SELECT DISTINCT customer FROM orders ORDER BY customer',
  // More dates, times and intervals.
  "SELECT date_trunc('week', placed), placed::time FROM orders ORDER BY id",
  'SELECT extract(epoch FROM placed), extract(second FROM placed), extract(milliseconds FROM placed) FROM orders ORDER BY id',
  "SELECT date_part('second', placed), date_part('epoch', placed) FROM orders ORDER BY id",
  'SELECT customer, max(placed) - min(placed) FROM orders GROUP BY customer ORDER BY 1',
  "SELECT interval '1 hour' * 3, interval '3 hours' / 2, date '2024-01-31' + interval '1 month'",
  "SELECT age(timestamp '2024-05-01', timestamp '2024-01-15')",
  "SELECT timestamptz '2024-05-01 10:15:00+02', '2024-05-01 10:15:00+02'::timestamptz::date",
  'SELECT placed::date - lag(placed::date) OVER (ORDER BY id) AS gap FROM orders ORDER BY id',
  // More text.
  "SELECT regexp_replace('abc123', '[0-9]+', 'X'), 'abc' ~ '^a', 'ABC' ~* 'b', 'abc' !~ 'z'",
  "SELECT string_to_array('a,b,c', ','), array_to_string(ARRAY['x', 'y'], '-')",
  "SELECT quote_ident('a b'), quote_literal('it''s'), chr(65), ascii('A'), to_hex(255)",
  "SELECT char_length('héllo'), octet_length('héllo'), upper('héllo'), starts_with('hello', 'he'), translate('abc', 'ab', 'xy')",
  'SELECT left(note, -2), right(note, -2) FROM orders ORDER BY id',
  // More numbers.
  'SELECT 10 % 3, -10 % 3, 10.5 % 3, trunc(2.789, 1), ceil(-1.5), floor(-1.5)',
  'SELECT 1::float8 / 3, 0.1::float4, 1e300::float8 * 10, cbrt(27.0), pi()',
  'SELECT round(2.5::float8), round(-0.5::float8), round(2.5), round(-0.5)',
  'SELECT log(100), ln(1), exp(0), sqrt(2::float8)',
  'SELECT 123456789012::bigint * 1000, 9223372036854775807 - 1',
  // More aggregates and grouping.
  'SELECT count(*) FILTER (WHERE paid), count(DISTINCT qty > 2) FROM orders',
  'SELECT array_agg(DISTINCT customer ORDER BY customer) FROM orders',
  'SELECT customer, sum(qty) FROM orders GROUP BY ROLLUP (customer) ORDER BY customer NULLS LAST',
  'SELECT DISTINCT ON (customer) customer, id FROM orders ORDER BY customer, id DESC',
  'SELECT coalesce(sum(qty), 0), sum(qty)::float8 / count(*), avg(amount)::numeric(10,2) FROM orders',
  'SELECT id, amount - lag(amount) OVER (ORDER BY id) AS delta FROM orders ORDER BY id',
  'SELECT mode() WITHIN GROUP (ORDER BY customer) FROM orders',
  // More joins and set operations.
  'SELECT c.name, t.total FROM customers c, LATERAL (SELECT sum(amount) AS total FROM orders o WHERE o.customer = c.id) t ORDER BY 1',
  'SELECT o.id, c.name FROM orders o FULL JOIN customers c ON c.id = o.customer ORDER BY o.id, c.id',
  'SELECT id FROM orders EXCEPT SELECT id FROM customers ORDER BY 1',
  'SELECT id FROM orders INTERSECT SELECT id FROM customers ORDER BY 1',
  'SELECT name FROM customers JOIN orders USING (id) ORDER BY name',
  'SELECT id, note FROM orders ORDER BY note DESC, id',
  'SELECT id, note FROM orders ORDER BY note, id',
  // More casts.
  "SELECT 't'::boolean, 'yes'::boolean, 'off'::boolean, '6b1b5e5e-1234-4a6b-9c1d-0123456789ab'::uuid",
  "SELECT '2024-05-01'::timestamp, '10:15'::time, '1 day'::interval, 42::bigint::text",
  // Errors: the same SQLSTATE.
  'SELECT 1 / 0',
  'SELECT 1.0 / 0',
  "SELECT 'x'::int",
  "SELECT '2024-13-01'::date",
  'SELECT 2147483647::int + 1',
  'SELECT nosuch FROM orders',
  'SELECT * FROM nosuch',
  'SELEC 1',
  // Table columns: their table and number in RowDescription, declared types (varchar(n), char(n), jsonb) and their text.
  'SELECT * FROM customers ORDER BY id',
  'SELECT c.name, c.country, o.meta, o.id AS order_id, o.* FROM customers c JOIN orders o ON o.customer = c.id ORDER BY o.id',
  'SELECT country, grade FROM (SELECT country, grade, id FROM customers) s ORDER BY id',
  'SELECT meta, \'{"b": 1, "a": [1,2.50,1e2]}\'::jsonb AS j FROM orders ORDER BY id',
  'SELECT upper(country), country || grade FROM customers ORDER BY id',
  // Parameters are exercised by the drivers' suites; the catalog by the tools'.
  // The server's functions: the statement's start, the size of indexes (none known to DuckDB), signals to no backend.
  "SELECT pg_typeof(statement_timestamp())::text, statement_timestamp() >= now(), statement_timestamp() - now() < interval '1 minute'",
  "SELECT pg_typeof(pg_indexes_size('orders'::regclass))::text, pg_indexes_size('orders'::regclass) >= 0",
  'SELECT pg_cancel_backend(0), pg_terminate_backend(0), pg_cancel_backend(NULL)',
  // set_config inside a larger query: any position, several columns, the new value as the setting shows it.
  "SELECT set_config('application_name', 'answers', false), 1",
  "SELECT 1 AS a, set_config('lock_timeout', '1000', false) AS b, set_config('search_path', current_setting('search_path'), false) AS c",
  "SELECT set_config('nosuch', 'x', false), 1",
  // PostgreSQL's keywords (pgjdbc's getSQLKeywords asks for those not in SQL:2003).
  'SELECT * FROM pg_get_keywords()',
  `select string_agg(word, ',') from pg_catalog.pg_get_keywords() where word <> ALL ('{${JDBC_SQL2003_KEYWORDS}}'::text[])`,
  // pgAdmin's dashboard sums pg_stat_database (sum(bigint) is numeric): its counters differ, their types do not.
  'SELECT least(sum(tup_inserted), 0) AS ins, least(sum(xact_commit), 0), least(sum(blks_read), 0), least(sum(tup_fetched), 0), least(sum(numbackends), 0) FROM pg_stat_database',
  // substring with a POSIX regular expression, and with a SQL one.
  "SELECT substring('order-123' from '[0-9]+'), substring('order-123' from 'r-(\\d)'), substring('abc' from 'x'), substring(note from 'o.') FROM orders ORDER BY id",
  "SELECT substring('Thomas' from '%#\"o_a#\"_' for '#'), substring('foobar' similar '%#\"o_b#\"%' escape '#'), substring('foobar' from '#\"o_b#\"%' for '#')",
  "SELECT substring('abcdef', 'c(d)e'), substring('abcdef' from 3), substring('abcdef' for 2), substring('abcdef' from 2 for 3)",
  // Timestamps as PostgreSQL reads them: an offset after a space, a time without seconds, Z.
  "SELECT '2024-07-01 00:00:00.000 +00:00'::timestamptz, timestamptz '2024-01-02 00:00+00', '2024-01-02 00:00:00+05:30'::timestamptz, '2024-01-02T10:00:00Z'::timestamptz",
  "SELECT '2024-07-01 00:00:00.000 +00:00'::timestamp, timestamp '2024-01-02 00:00+00', '2024-01-02 00:00:00+05:30'::timestamp, CAST('2024-01-02 10:00:00 Z' AS timestamptz)",
  "SELECT s::timestamptz, CAST(s AS timestamp), s::timestamp with time zone FROM (VALUES ('2024-07-01 00:00:00.000 +00:00'), ('2024-01-02 00:00+05'), (NULL)) v(s)",
  // jsonb's set-returning functions in FROM, of a literal and of a table's column.
  'SELECT * FROM jsonb_each_text(\'{"a":1,"b":null}\'::jsonb) ORDER BY key',
  'SELECT o.id, e.key, e.value FROM orders o, jsonb_each_text(o.meta) e ORDER BY o.id, e.key',
  'SELECT * FROM jsonb_array_elements_text(\'[1,"x",null]\'::jsonb)',
  'SELECT * FROM jsonb_object_keys(\'{"b":1,"a":2}\'::jsonb) ORDER BY 1',
  'SELECT o.id, k FROM orders o, jsonb_object_keys(o.meta) k ORDER BY o.id, k',
  'SELECT * FROM jsonb_array_elements(\'{"a":1}\'::jsonb)',
  // ... in jsonb's key order (shortest first, then by bytes) with no ORDER BY, and nested values with jsonb's spacing.
  'SELECT * FROM jsonb_each_text(\'{"bb":1,"a":2,"B":3,"aa":{"y":1,"x":[1, 2]},"é":5,"z":null}\'::jsonb)',
  'SELECT * FROM jsonb_object_keys(\'{"bb":1,"a":2,"B":3}\'::jsonb)',
  'SELECT value::text FROM jsonb_each(\'{"b":{"z":1,"a":2},"a":[{"d":1,"c":2}]}\'::jsonb)',
  'SELECT x FROM jsonb_array_elements_text(\'[{"b":1,"a":2}, "s", null, 3]\'::jsonb) AS x',
  'SELECT value::text FROM jsonb_array_elements(\'[{"b":1,"a":2}, [3, {"y":1,"x":2}]]\'::jsonb)',
  'SELECT * FROM json_each_text(\'{"bb":1,"a":2}\')',
  // DISTINCT ON without ORDER BY comes back in its keys' order, as PostgreSQL's sort gives it.
  'SELECT DISTINCT ON (customer) customer, id, amount FROM orders',
  'SELECT DISTINCT ON (paid, customer) paid, customer FROM orders WHERE customer IS NOT NULL',
  // Extensions whose functions cotwire has: uuid-ossp's, as TypeORM creates it for its uuid columns.
  'CREATE EXTENSION IF NOT EXISTS "uuid-ossp"',
  "SELECT extname::text AS name, extversion || '' AS version FROM pg_extension WHERE extname = 'uuid-ossp'",
  "SELECT uuid_generate_v5(uuid_ns_dns(), 'www.example.com'), uuid_generate_v3(uuid_ns_url(), 'x'), uuid_nil(), uuid_ns_oid(), uuid_ns_x500()",
  'CREATE EXTENSION nosuch_extension',
  'CREATE TABLE tokens (id uuid DEFAULT uuid_generate_v4() PRIMARY KEY, name text)',
  "INSERT INTO tokens (name) VALUES ('a'), ('b')",
  'SELECT count(DISTINCT id), count(*), bool_and(id IS NOT NULL) FROM tokens',
];

/**
 * The differences that remain, each named in docs/compatibility.md: the
 * value agrees and only the type differs (cotwire's OID, PostgreSQL's), or
 * cotwire refuses with a clear error where PostgreSQL answers.
 */
const DIFFER: ReadonlyArray<{ readonly sql: string; readonly types?: readonly [number, number]; readonly refused?: string }> = [
  // name is text: the same text, sent as text (25) rather than name (19).
  { sql: 'SELECT current_schema()', types: [25, 19] },
  // jsonb's set-returning functions give json values.
  { sql: 'SELECT o.id, e.key, e.value FROM orders o, jsonb_each(o.meta) e ORDER BY o.id, e.key', types: [114, 3802] },
  { sql: 'SELECT * FROM jsonb_array_elements(\'[1,"x",null]\'::jsonb)', types: [114, 3802] },
  // DuckDB cannot group the rows a set-returning function makes in the same query level.
  { sql: 'SELECT unnest(tags) AS tag, count(*) FROM orders GROUP BY 1 ORDER BY 1', refused: '0A000' },
];

/** A result column: its name, type OID, column number, and whether it names a table (whose OID differs between servers). */
type Column = readonly [string, number, number, boolean];

type Answer = { readonly columns: ReadonlyArray<Column>; readonly rows: readonly (readonly (string | null)[])[] } | { readonly error: string };

const raw = { getTypeParser: () => (value: string) => value };

async function answer(client: pg.Client, sql: string): Promise<Answer> {
  try {
    const r = await client.query({ text: sql, rowMode: 'array', types: raw });
    return { columns: r.fields.map((f): Column => [f.name, f.dataTypeID, f.columnID, f.tableID !== 0]), rows: r.rows as (string | null)[][] };
  } catch (e) {
    const err = e as { code?: string; message: string };
    return { error: `${err.code ?? '?'}: ${err.message}` };
  }
}

/**
 * numeric's text carries its display scale, which PostgreSQL derives from
 * the operands (2.5000000000000000 for 5.0 / 2) and cotwire does not keep;
 * and cotwire's numeric division and avg() keep 15 significant digits where
 * PostgreSQL's keep at least 16 (docs/compatibility.md). numeric values
 * agree when they are equal, or when the longer, rounded to the shorter's
 * 15 significant digits, is the shorter.
 */
function sameNumeric(a: string, b: string): boolean {
  const trim = (s: string): string => (s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s);
  const x = trim(a);
  const y = trim(b);
  if (x === y) return true;
  const digits = (s: string): number => s.replace(/^-?[0.]*/, '').replace('.', '').length;
  const [short, long] = x.length <= y.length ? [x, y] : [y, x];
  if (digits(short) !== 15) return false;
  return trim(Number.parseFloat(long).toPrecision(15)) === short;
}

function sameValue(oid: number, a: string | null, b: string | null): boolean {
  if (a === b) return true;
  if (a === null || b === null) return false;
  return oid === 1700 ? sameNumeric(a, b) : false;
}

/** The differences between two answers, as lines; none when they agree. */
function differences(ours: Answer, theirs: Answer): string[] {
  if ('error' in theirs || 'error' in ours) {
    const same = 'error' in theirs && 'error' in ours && ours.error.slice(0, 5) === theirs.error.slice(0, 5);
    return same ? [] : [`cotwire: ${JSON.stringify(ours)}`, `postgres: ${JSON.stringify(theirs)}`];
  }
  const out: string[] = [];
  if (JSON.stringify(ours.columns) !== JSON.stringify(theirs.columns)) {
    out.push(`columns: cotwire ${JSON.stringify(ours.columns)}, postgres ${JSON.stringify(theirs.columns)}`);
  }
  if (ours.rows.length !== theirs.rows.length) out.push(`rows: cotwire ${ours.rows.length}, postgres ${theirs.rows.length}`);
  ours.rows.forEach((row, r) => {
    row.forEach((value, c) => {
      const other = theirs.rows[r]?.[c] ?? null;
      const oid = theirs.columns[c]?.[1] ?? 0;
      if (!sameValue(oid, value, other)) out.push(`row ${r} column ${c}: cotwire ${JSON.stringify(value)}, postgres ${JSON.stringify(other)}`);
    });
  });
  return out;
}

describe('analysts’ and agents’ statements answer as PostgreSQL does', () => {
  let ours: pg.Client;
  let theirs: pg.Client;

  beforeAll(async () => {
    ours = new pg.Client({ host: '127.0.0.1', port: servers.cotwire.port, user: 'cotwire', database: 'cotwire' });
    theirs = new pg.Client({ host: '127.0.0.1', port: servers.postgres.port, user: servers.postgres.user, database: 'postgres' });
    await ours.connect();
    await theirs.connect();
    for (const sql of SCHEMA) {
      await ours.query(sql);
      await theirs.query(sql);
    }
  });

  afterAll(async () => {
    await ours?.end();
    await theirs?.end();
  });

  it.each(AGREE)('%s', async (sql) => {
    expect(differences(await answer(ours, sql), await answer(theirs, sql))).toEqual([]);
  });

  it.each(DIFFER)('differs only as documented: $sql', async ({ sql, types, refused }) => {
    const mine = await answer(ours, sql);
    const real = await answer(theirs, sql);
    if (refused !== undefined) {
      expect('error' in mine && mine.error.startsWith(`${refused}:`)).toBe(true);
      expect('error' in real).toBe(false);
      return;
    }
    if ('error' in mine || 'error' in real || types === undefined) throw new Error(`${JSON.stringify(mine)} ${JSON.stringify(real)}`);
    expect(mine.columns.map(([, oid]) => oid)).toContain(types[0]);
    const renamed = { ...mine, columns: mine.columns.map(([name, oid, attnum, table]): Column => [name, oid === types[0] ? types[1] : oid, attnum, table]) };
    expect(differences(renamed, real)).toEqual([]);
  });

  it('refuses a grouped set-returning function with a hint that shows the subquery', async () => {
    const err = await ours.query('SELECT unnest(tags) AS tag, count(*) FROM orders GROUP BY 1').catch((e: unknown) => e as pg.DatabaseError);
    expect((err as pg.DatabaseError).code).toBe('0A000');
    expect((err as pg.DatabaseError).hint).toMatch(/subquery/);
  });
});
